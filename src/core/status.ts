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

/**
 * Folds `(status, count)` rows of a `GROUP BY status` query into `{ pending, done }`, with 0 for a
 * status that has no rows.
 */
export function countByStatus(rows: readonly { status: string; count: number | string }[]): {
  pending: number;
  done: number;
} {
  const counts = { pending: 0, done: 0 };
  for (const row of rows) {
    if (row.status === KeyStatus.pending || row.status === KeyStatus.done) {
      counts[row.status] = Number(row.count);
    }
  }
  return counts;
}
