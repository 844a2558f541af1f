import Database from 'better-sqlite3';
import { describe, expect, it } from 'vitest';
import { UnserializableResponseError } from '../../src/index.js';
import { openSqliteStore, SqliteGroupCommitStore } from '../../src/sqlite/index.js';
import { describeLeaseContract } from '../contract/lease-contract.js';
import { describeStoreContract } from '../contract/store-contract.js';
import { readRows, seedRows } from '../support/sqlite-harness.js';
import { freshDbPath, tempDir } from '../support/temp.js';

const dir = tempDir();

function open(busyTimeoutMs?: number) {
  const path = freshDbPath(dir);
  const options = busyTimeoutMs === undefined ? {} : { busyTimeoutMs };
  return { path, store: new SqliteGroupCommitStore(openSqliteStore(path, options)) };
}

const groupCommitHarness = async () => {
  const { path, store } = open();
  return {
    store,
    rows: async () => readRows(path),
    seed: async (rows: Parameters<typeof seedRows>[1]) => seedRows(path, rows),
    close: () => store.close(),
  };
};

describeStoreContract('SQLite file with group commit', groupCommitHarness);
describeLeaseContract('SQLite file with group commit', groupCommitHarness);

describe('group commit on SQLite', () => {
  it('commits a burst of concurrent reserves together, every one of them', async () => {
    const { path, store } = open();
    const results = await Promise.all(
      Array.from({ length: 32 }, (_, i) => store.reserve(`k${i}`, 'd', 100)),
    );
    expect(results).toEqual(Array(32).fill(true));
    expect(store.batches).toBe(1);
    expect(readRows(path)).toHaveLength(32);
    await store.close();
  });

  it('runs calls at once while they come singly, and batches whole bursts once they do', async () => {
    const { path, store } = open();
    const reader = new Database(path, { readonly: true });
    const written = (key: string) =>
      reader.prepare('SELECT count(*) FROM keys WHERE id = ?').pluck().get(key) === 1;
    const lone = store.reserve('lone', 'd', 100);
    expect(written('lone')).toBe(true);
    await lone;
    await Promise.all(Array.from({ length: 8 }, (_, i) => store.reserve(`a${i}`, 'd', 100)));
    expect(store.batches).toBe(1);
    const first = store.reserve('b0', 'd', 100);
    expect(written('b0')).toBe(false);
    await Promise.all([
      first,
      ...Array.from({ length: 7 }, (_, i) => store.reserve(`b${i + 1}`, 'd', 100)),
    ]);
    expect(written('b0')).toBe(true);
    expect(store.batches).toBe(2);
    await store.reserve('c', 'd', 100);
    const quiet = store.reserve('d', 'd', 100);
    expect(written('d')).toBe(true);
    await quiet;
    reader.close();
    await store.close();
  });

  it('runs a read and the write that follows it in the same turn at once, while calls come singly', async () => {
    const { path, store } = open();
    const reader = new Database(path, { readonly: true });
    const written = (key: string) =>
      reader.prepare('SELECT count(*) FROM keys WHERE id = ?').pluck().get(key) === 1;
    expect(await store.get('solo')).toBeNull();
    // Still the turn of the read: the write is the turn's first write, so nothing waits for it.
    const reserved = store.reserve('solo', 'd', 100);
    expect(written('solo')).toBe(true);
    expect(await reserved).toBe(true);
    expect(store.batches).toBe(0);
    reader.close();
    await store.close();
  });

  it('lets a read wait behind the writes queued before it, and not run ahead of them', async () => {
    const { path, store } = open();
    await Promise.all(Array.from({ length: 4 }, (_, i) => store.reserve(`w${i}`, 'd', 100)));
    // The burst above leaves the store batching: these writes queue, and the read must see them.
    const writes = Array.from({ length: 4 }, (_, i) => store.reserve(`q${i}`, 'd', 100));
    const counted = store.counts();
    expect(readRows(path)).toHaveLength(4);
    await Promise.all(writes);
    expect((await counted).pending).toBe(8);
    await store.close();
  });

  it('still lets exactly one of many concurrent reserves of one key win', async () => {
    const { path, store } = open();
    const results = await Promise.all(
      Array.from({ length: 32 }, (_, i) => store.reserve('same', `d${i}`, 100)),
    );
    expect(results.filter(Boolean)).toHaveLength(1);
    expect(readRows(path).map((row) => row.fingerprint)).toEqual(['d0']);
    await store.close();
  });

  it('runs operations in call order, so a fetch sees the finish called before it', async () => {
    const { store } = open();
    const reserved = store.reserve('k', 'd', 100);
    const finished = store.finish('k', 'd', { receipt: 1 });
    const fetched = store.fetch('k', 0);
    expect(await Promise.all([reserved, finished, fetched])).toEqual([true, true, { receipt: 1 }]);
    await store.close();
  });

  it('rejects only the bad call of a batch; its row stays pending and the others commit', async () => {
    const { path, store } = open();
    await Promise.all([store.reserve('a', 'd', 100), store.reserve('b', 'd', 100)]);
    const batchesBefore = store.batches;
    const settled = await Promise.allSettled([
      store.reserve('c', 'd', 100),
      store.finish('a', 'd', { total: () => 1 }),
      store.finish('b', 'd', { receipt: 2 }),
      store.reserve('e', 'd', 100),
    ]);
    expect(store.batches).toBe(batchesBefore + 1);
    expect(settled.map((result) => result.status)).toEqual([
      'fulfilled',
      'rejected',
      'fulfilled',
      'fulfilled',
    ]);
    expect((settled[1] as PromiseRejectedResult).reason).toBeInstanceOf(
      UnserializableResponseError,
    );
    expect(readRows(path).map((row) => [row.id, row.status])).toEqual([
      ['a', 'pending'],
      ['b', 'done'],
      ['c', 'pending'],
      ['e', 'pending'],
    ]);
    await store.close();
  });

  it('fails the whole batch, writing nothing, when the write lock stays taken', async () => {
    const { path, store } = open(50);
    const holder = new Database(path);
    holder.exec('BEGIN IMMEDIATE');
    const settled = await Promise.allSettled(
      ['a', 'b', 'c'].map((key) => store.reserve(key, 'd', 100)),
    );
    holder.exec('ROLLBACK');
    holder.close();
    expect(settled.map((result) => result.status)).toEqual(['rejected', 'rejected', 'rejected']);
    for (const result of settled) {
      expect((result as PromiseRejectedResult).reason).toMatchObject({ code: 'SQLITE_BUSY' });
    }
    expect(readRows(path)).toEqual([]);
    expect(await store.reserve('a', 'd', 100)).toBe(true);
    await store.close();
  });
});
