/**
 * The two states a key can be in.
 *
 * - `pending`: work is in flight and owned by whoever reserved the key. Retention never ends it.
 * - `done`: the answer is stored and replayed until its `expires` deadline.
 *
 * @example
 * ```ts
 * import { KeyStatus } from 'drizzle-idempotency';
 * if (record.status === KeyStatus.done) replay(record.response);
 * ```
 */
export const KeyStatus = {
  pending: 'pending',
  done: 'done',
} as const;

/** One of the values of {@link KeyStatus}. */
export type KeyStatus = (typeof KeyStatus)[keyof typeof KeyStatus];
