import Database from 'better-sqlite3';
import { describe, expect, it } from 'vitest';
import {
  type IdempotencyStore,
  InvalidKeyError,
  UnserializableResponseError,
} from '../../src/index.js';
import { readRows } from '../support/sqlite-harness.js';

/** A store that commits the calls of one burst together, and how many batches it has committed. */
type BatchingStore = IdempotencyStore<unknown> & { readonly batches: number };

/** Opens a batching store on a new SQLite file, waiting at most `busyTimeoutMs` for its lock. */
export type OpenBatchingStore = (
  busyTimeoutMs?: number,
) => Promise<{ path: string; store: BatchingStore }>;

/**
 * What every store with group commit on a SQLite file must do beyond the store contract: a burst
 * is one transaction, yet each call keeps its own verdict, its own error and its place in the
 * call order; a batch the file refuses fails whole.
 *
 * @param name - the store, as the suite's title names it
 * @param open - makes one store on a fresh file
 */
export function describeGroupCommit(name: string, open: OpenBatchingStore): void {
  describe(`group commit: ${name}`, () => {
    it('commits a burst of concurrent reserves together, every one of them', async () => {
      const { path, store } = await open();
      const results = await Promise.all(
        Array.from({ length: 32 }, (_, i) => store.reserve(`k${i}`, 'd', 100)),
      );
      expect(results).toEqual(Array(32).fill(true));
      expect(store.batches).toBe(1);
      expect(readRows(path)).toHaveLength(32);
      await store.close();
    });

    it('still lets exactly one of many concurrent reserves of one key win', async () => {
      const { path, store } = await open();
      const results = await Promise.all(
        Array.from({ length: 32 }, (_, i) => store.reserve('same', `d${i}`, 100)),
      );
      expect(results.filter(Boolean)).toHaveLength(1);
      expect(readRows(path).map((row) => row.fingerprint)).toEqual(['d0']);
      await store.close();
    });

    it('runs operations in call order, so a fetch sees the finish called before it', async () => {
      const { store } = await open();
      const reserved = store.reserve('k', 'd', 100);
      const finished = store.finish('k', 'd', { receipt: 1 });
      const fetched = store.fetch('k', 0);
      expect(await Promise.all([reserved, finished, fetched])).toEqual([
        true,
        true,
        { receipt: 1 },
      ]);
      await store.close();
    });

    it('rejects only the bad calls of a batch, with their typed errors; the others commit', async () => {
      const { path, store } = await open();
      await Promise.all([store.reserve('a', 'd', 100), store.reserve('b', 'd', 100)]);
      const batchesBefore = store.batches;
      const settled = await Promise.allSettled([
        store.reserve('c', 'd', 100),
        store.finish('a', 'd', { total: () => 1 }),
        store.reserve('', 'd', 100),
        store.finish('b', 'd', { receipt: 2 }),
        store.reserve('e', 'd', 100),
      ]);
      expect(settled.map((result) => result.status)).toEqual([
        'fulfilled',
        'rejected',
        'rejected',
        'fulfilled',
        'fulfilled',
      ]);
      expect(store.batches).toBe(batchesBefore + 1);
      expect((settled[1] as PromiseRejectedResult).reason).toBeInstanceOf(
        UnserializableResponseError,
      );
      expect((settled[2] as PromiseRejectedResult).reason).toBeInstanceOf(InvalidKeyError);
      expect(readRows(path).map((row) => [row.id, row.status])).toEqual([
        ['a', 'pending'],
        ['b', 'done'],
        ['c', 'pending'],
        ['e', 'pending'],
      ]);
      await store.close();
    });

    it('fails the whole batch with SQLite’s error, writing nothing, when the write lock stays taken', async () => {
      const { path, store } = await open(50);
      const holder = new Database(path);
      holder.exec('BEGIN IMMEDIATE');
      const settled = await Promise.allSettled(
        ['a', 'b', 'c'].map((key) => store.reserve(key, 'd', 100)),
      );
      holder.exec('ROLLBACK');
      holder.close();
      for (const result of settled) {
        expect(result.status).toBe('rejected');
        expect((result as PromiseRejectedResult).reason).toMatchObject({ code: 'SQLITE_BUSY' });
      }
      expect(readRows(path)).toEqual([]);
      expect(await store.reserve('a', 'd', 100)).toBe(true);
      await store.close();
    });
  });
}
