import Database from 'better-sqlite3';
import { getTableConfig } from 'drizzle-orm/sqlite-core';
import { describe, expect, it } from 'vitest';
import {
  DatabaseOpenError,
  InvalidKeyError,
  InvalidOptionError,
  SchemaMismatchError,
  StoreClosedError,
  UnserializableResponseError,
} from '../../src/index.js';
import {
  type OpenSqliteStoreOptions,
  openSqliteStore,
  openSqliteWorkerStore,
  StoreThreadExitedError,
  sqliteKeysTable,
  sqliteTransaction,
  TransactionUnsupportedError,
} from '../../src/sqlite/index.js';
import type { HarnessFactory } from '../contract/harness.js';
import { describeLeaseContract } from '../contract/lease-contract.js';
import { describeStoreContract } from '../contract/store-contract.js';
import { readRows, seedRows } from '../support/sqlite-harness.js';
import { freshDbPath, tempDir } from '../support/temp.js';
import { until } from '../support/waiting.js';

const dir = tempDir();

function workerHarness(options: OpenSqliteStoreOptions = {}): HarnessFactory {
  return async () => {
    const path = freshDbPath(dir);
    const store = await openSqliteWorkerStore(path, options);
    const table = options.table === undefined ? 'keys' : getTableConfig(options.table).name;
    return {
      store,
      rows: async () => readRows(path, table),
      seed: async (rows) => seedRows(path, rows, table),
      close: () => store.close(),
    };
  };
}

// One run of the store contract, on the configuration that crosses the most: a table name and an
// answer cache that live in the worker. Each test starts a thread, which from the sources costs a
// second or more, so the default table is left to the lease contract below.
describeStoreContract(
  'SQLite file on a worker thread, table renamed, answers cached',
  workerHarness({ table: sqliteKeysTable('idem_keys'), answerCacheSize: 100 }),
);
describeLeaseContract('SQLite file on a worker thread', workerHarness());

describe('the SQLite store on a worker thread', () => {
  it('commits a burst of concurrent reserves together, every one of them', async () => {
    const path = freshDbPath(dir);
    const store = await openSqliteWorkerStore(path);
    const results = await Promise.all(
      Array.from({ length: 32 }, (_, i) => store.reserve(`k${i}`, 'd', 100)),
    );
    expect(results).toEqual(Array(32).fill(true));
    expect(store.batches).toBe(1);
    expect(readRows(path)).toHaveLength(32);
    await store.close();
  });

  it('still lets exactly one of many concurrent reserves of one key win', async () => {
    const path = freshDbPath(dir);
    const store = await openSqliteWorkerStore(path);
    const results = await Promise.all(
      Array.from({ length: 32 }, (_, i) => store.reserve('same', `d${i}`, 100)),
    );
    expect(results.filter(Boolean)).toHaveLength(1);
    expect(readRows(path).map((row) => row.fingerprint)).toEqual(['d0']);
    await store.close();
  });

  it('runs operations in call order, so a fetch sees the finish called before it', async () => {
    const store = await openSqliteWorkerStore(freshDbPath(dir));
    const reserved = store.reserve('k', 'd', 100);
    const finished = store.finish('k', 'd', { receipt: 1 });
    const fetched = store.fetch('k', 0);
    expect(await Promise.all([reserved, finished, fetched])).toEqual([true, true, { receipt: 1 }]);
    await store.close();
  });

  it('rejects a bad argument with its typed error, and its neighbours commit', async () => {
    const path = freshDbPath(dir);
    const store = await openSqliteWorkerStore(path);
    await store.reserve('a', 'd', 100);
    const settled = await Promise.allSettled([
      store.reserve('b', 'd', 100),
      store.finish('a', 'd', { total: () => 1 }),
      store.reserve('', 'd', 100),
      store.finish('a', 'd', { receipt: 2 }),
    ]);
    expect(settled.map((result) => result.status)).toEqual([
      'fulfilled',
      'rejected',
      'rejected',
      'fulfilled',
    ]);
    expect((settled[1] as PromiseRejectedResult).reason).toBeInstanceOf(
      UnserializableResponseError,
    );
    expect((settled[2] as PromiseRejectedResult).reason).toBeInstanceOf(InvalidKeyError);
    expect(readRows(path).map((row) => [row.id, row.status])).toEqual([
      ['a', 'done'],
      ['b', 'pending'],
    ]);
    await store.close();
  });

  it('fails the whole batch with SQLite’s error, writing nothing, when the write lock stays taken', async () => {
    const path = freshDbPath(dir);
    const store = await openSqliteWorkerStore(path, { busyTimeoutMs: 50 });
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

  it('refuses what it cannot open with the typed error of openSqliteStore', async () => {
    await expect(openSqliteWorkerStore(`${dir}/missing/dir/x.db`)).rejects.toBeInstanceOf(
      DatabaseOpenError,
    );
    const path = freshDbPath(dir);
    const foreign = new Database(path);
    foreign.exec('CREATE TABLE keys (id INTEGER PRIMARY KEY, other TEXT)');
    foreign.close();
    await expect(openSqliteWorkerStore(path)).rejects.toBeInstanceOf(SchemaMismatchError);
    await expect(
      openSqliteWorkerStore(freshDbPath(dir), { answerCacheSize: -1 }),
    ).rejects.toBeInstanceOf(InvalidOptionError);
    await expect(
      openSqliteWorkerStore(freshDbPath(dir), { synchronous: 'SOMETIMES' as never }),
    ).rejects.toBeInstanceOf(InvalidOptionError);
  });

  it('shares the file with a synchronous store, which runs the transactional form', async () => {
    const path = freshDbPath(dir);
    const store = await openSqliteWorkerStore(path);
    expect(() => sqliteTransaction(store as never)).toThrow(TransactionUnsupportedError);
    expect(() => store.db).toThrow(TransactionUnsupportedError);
    const sync = openSqliteStore(path);
    const transaction = sqliteTransaction(sync);
    expect(transaction).toBeDefined();
    expect(await store.reserve('k', 'd', 100)).toBe(true);
    expect(sync.get('k')?.status).toBe('pending');
    sync.close();
    await store.close();
  });

  it('rejects the calls waiting on a worker that dies, and reports itself closed', async () => {
    const store = await openSqliteWorkerStore(freshDbPath(dir));
    expect(await store.reserve('before', 'd', 100)).toBe(true);
    const waiting = Array.from({ length: 8 }, (_, i) => store.reserve(`k${i}`, 'd', 100));
    const settled = Promise.allSettled(waiting);
    await store.worker.terminate();
    for (const result of await settled) {
      if (result.status === 'rejected') {
        expect(result.reason).toBeInstanceOf(StoreThreadExitedError);
      }
    }
    expect(store.closed).toBe(true);
    await expect(store.reserve('after', 'd', 100)).rejects.toBeInstanceOf(StoreThreadExitedError);
    await expect(store.close()).resolves.toBeUndefined();
  });

  it('rejects with the crash that ended the worker', async () => {
    const store = await openSqliteWorkerStore(freshDbPath(dir));
    // A message without its calls throws in the worker's handler: an uncaught error there, which
    // ends the thread.
    store.worker.postMessage({});
    await until(() => store.closed);
    const error = await store.get('k').catch((reason: unknown) => reason);
    expect(error).toBeInstanceOf(StoreThreadExitedError);
    expect((error as StoreThreadExitedError).exitCode).toBeUndefined();
    expect((error as Error).cause).toBeInstanceOf(Error);
  });

  it('closes after the calls made before, then ends its thread', async () => {
    const path = freshDbPath(dir);
    const store = await openSqliteWorkerStore(path);
    const exited = new Promise<number>((resolve) => store.worker.once('exit', resolve));
    const reserved = store.reserve('k', 'd', 100);
    await store.close();
    expect(await reserved).toBe(true);
    await exited;
    expect(store.closed).toBe(true);
    await expect(store.reserve('x', 'd', 100)).rejects.toBeInstanceOf(StoreClosedError);
    expect(readRows(path)).toHaveLength(1);
  });
});
