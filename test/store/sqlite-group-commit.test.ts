import Database from 'better-sqlite3';
import { describe, expect, it } from 'vitest';
import { openSqliteStore, SqliteGroupCommitStore } from '../../src/sqlite/index.js';
import { readRows } from '../support/sqlite-harness.js';
import { freshDbPath, tempDir } from '../support/temp.js';
import { describeGroupCommit } from './group-commit-suite.js';

const dir = tempDir();

function open(busyTimeoutMs?: number) {
  const path = freshDbPath(dir);
  const options = busyTimeoutMs === undefined ? {} : { busyTimeoutMs };
  return { path, store: new SqliteGroupCommitStore(openSqliteStore(path, options)) };
}

describeGroupCommit('SqliteGroupCommitStore', async (busyTimeoutMs) => open(busyTimeoutMs));

describe('group commit on SQLite', () => {
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
});
