import { describe, expect, it } from 'vitest';
import type { LeasedIdempotencyStore } from '../../src/index.js';
import type { RawRow } from '../contract/harness.js';
import { tokenOf } from '../contract/lease-contract.js';

/** A store opened from a URL, so that it owns its pool and `close()` ends it. */
export interface OwnedPoolStore {
  readonly store: LeasedIdempotencyStore;
  /** Every row, read through a pool of the test's own. */
  rows(): Promise<RawRow[]>;
  /** Drops the database. */
  drop(): Promise<void>;
}

const LEASE = { expires: 1000, now: 100, leaseSeconds: 30 };

/**
 * Issue 33, item 3, on a store that ends its own pool on `close()`: the finishes called in the
 * same turn as `close()` all land before the pool ends.
 */
export function describeOwnedPoolClose(dialect: string, open: () => Promise<OwnedPoolStore>): void {
  describe(`close of a store that owns its pool: ${dialect}`, () => {
    it('ends the pool only once every finish called before close has committed', async () => {
      const { store, rows, drop } = await open();
      try {
        const ids = Array.from({ length: 20 }, (_, i) => `k${String(i).padStart(2, '0')}`);
        const tokens = await Promise.all(
          ids.map(async (id) => tokenOf(await store.acquire(id, 'd', LEASE))),
        );
        const finishes = ids.map((id, i) => store.finish(id, 'd', { n: i }, tokens[i]));
        const closed = store.close();
        expect(await Promise.all(finishes)).toEqual(ids.map(() => true));
        await closed;
        expect((await rows()).map((row) => [row.id, row.status, row.response])).toEqual(
          ids.map((id, i) => [id, 'done', `{"n":${i}}`]),
        );
      } finally {
        await drop();
      }
    });
  });
}
