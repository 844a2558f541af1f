import Database from 'better-sqlite3';
import { describe, expect, it } from 'vitest';
import {
  DatabaseOpenError,
  InvalidOptionError,
  SchemaMismatchError,
  StoreClosedError,
} from '../../src/index.js';
import {
  openSqliteStore,
  openSqliteWorkerStore,
  StoreThreadExitedError,
  sqliteTransaction,
  TransactionUnsupportedError,
} from '../../src/sqlite/index.js';
import { readRows } from '../support/sqlite-harness.js';
import { freshDbPath, tempDir } from '../support/temp.js';
import { until } from '../support/waiting.js';
import { describeGroupCommit } from './group-commit-suite.js';

const dir = tempDir();

describeGroupCommit('the SQLite store on a worker thread', async (busyTimeoutMs) => {
  const path = freshDbPath(dir);
  const options = busyTimeoutMs === undefined ? {} : { busyTimeoutMs };
  return { path, store: await openSqliteWorkerStore(path, options) };
});

describe('the SQLite store on a worker thread', () => {
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
