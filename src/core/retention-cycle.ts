import type { IdempotencyStore } from './store.js';

/**
 * The steps of {@link retentionCycle} and of the one-shot SQLite `retentionCycle`: reserve with
 * `'v1'` until 10, finish with `{ receipt: 1 }`, purge at `now = 10`, then reserve again with
 * `'v2'` until 20. On an empty store the second reserve returns `true`: once its answer is purged a
 * key is a new request.
 */
export const RETENTION_CYCLE = {
  first: { fingerprint: 'v1', expires: 10, response: { receipt: 1 } },
  purgeAt: 10,
  second: { fingerprint: 'v2', expires: 20 },
} as const;

/**
 * Shows the limit of retention on `store`, through its own operations: `key` is reserved with
 * `'v1'` until 10, finished with `{ receipt: 1 }`, purged at `now = 10`, then reserved again with
 * `'v2'` until 20. On an empty store it resolves to `true` and leaves the row `pending` with
 * fingerprint `'v2'`: once its answer is purged a key is a new request, which is why retention
 * must outlast every retry.
 *
 * @param store - any store; best a fresh one, since the cycle's purge deletes what is expired at 10
 * @param key - the key the cycle runs on
 * @throws what the store throws, e.g. {@link InvalidKeyError} for a key it refuses
 * @example
 * ```ts
 * import { retentionCycle } from 'drizzle-idempotency';
 * await retentionCycle(store, 'order-42'); // true
 * ```
 */
export async function retentionCycle(
  store: IdempotencyStore<unknown>,
  key: string,
): Promise<boolean> {
  const { first, purgeAt, second } = RETENTION_CYCLE;
  await store.reserve(key, first.fingerprint, first.expires);
  await store.finish(key, first.fingerprint, first.response);
  await store.purge(purgeAt);
  return store.reserve(key, second.fingerprint, second.expires);
}
