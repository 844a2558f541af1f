import { copyFileSync } from 'node:fs';
import Database from 'better-sqlite3';
import { describe, expect, it } from 'vitest';
import { openSqliteStore } from '../../src/sqlite/index.js';
import { seedRows } from '../support/sqlite-harness.js';
import { freshDbPath, tempDir } from '../support/temp.js';

const dir = tempDir();

// The main database file alone, without its WAL: what a checkpoint has already written back.
function rowsInMainFile(path: string): number {
  const copy = freshDbPath(dir);
  copyFileSync(path, copy);
  const client = new Database(copy, { readonly: true });
  try {
    return client.prepare('SELECT count(*) FROM keys').pluck().get() as number;
  } finally {
    client.close();
  }
}

describe('sweepBatch on a WAL file', () => {
  it('checkpoints its own deletes, so no later commit of a request has to copy them back', () => {
    const path = freshDbPath(dir);
    const store = openSqliteStore(path);
    seedRows(
      path,
      Array.from({ length: 20 }, (_, i) => ({
        id: `k${i}`,
        fingerprint: 'd',
        status: i < 15 ? 'done' : 'pending',
        response: i < 15 ? '{}' : null,
        expires: 5,
      })),
    );
    store.db.$client.pragma('wal_checkpoint(TRUNCATE)');
    expect(rowsInMainFile(path)).toBe(20);
    store.reserve('new', 'd', 100);
    expect(store.sweepBatch(10, 10)).toBe(10);
    expect(rowsInMainFile(path)).toBe(11);
    store.close();
  });
});
