import type { IdempotencyStore } from '../../src/index.js';

/** Rows deleted per transaction: small, so a sweep never holds the write lock for long. */
const BATCH_SIZE = 100;

/**
 * Deletes every expired answer at `now`, one short batch at a time, and returns how many. Pending
 * rows are never touched: `sweepBatch` only deletes `done` rows past their deadline.
 */
export async function sweepExpired(store: IdempotencyStore<unknown>, now: number): Promise<number> {
  let total = 0;
  for (;;) {
    const deleted = await store.sweepBatch(now, BATCH_SIZE);
    total += deleted;
    if (deleted < BATCH_SIZE) return total;
  }
}
