import { existsSync } from 'node:fs';
import Database from 'better-sqlite3';
import { describe, expect, it } from 'vitest';
import { InvalidOptionError } from '../../src/index.js';
import { openSqliteStore } from '../../src/sqlite/index.js';
import { freshDbPath, tempDir } from '../support/temp.js';

const dir = tempDir();

// Writes that bypass the store: the only way a cached answer can be observed as such.
function bypass(path: string, statement: string): void {
  const client = new Database(path);
  try {
    client.exec(statement);
  } finally {
    client.close();
  }
}

function doneStore(size: number, ids: string[], expires = 100) {
  const path = freshDbPath(dir);
  const store = openSqliteStore<{ receipt: string }>(path, { answerCacheSize: size });
  for (const id of ids) {
    store.reserve(id, 'd', expires);
    store.finish(id, 'd', { receipt: id });
  }
  return { path, store };
}

describe('the answer cache of the SQLite store', () => {
  it('replays a fetched answer from memory while now < expires, never at or after it', () => {
    const { path, store } = doneStore(8, ['a']);
    expect(store.fetch('a', 50)).toEqual({ receipt: 'a' });
    bypass(path, 'UPDATE keys SET response = \'{"receipt":"changed"}\'');
    expect(store.fetch('a', 99.999)).toEqual({ receipt: 'a' });
    expect(store.fetch('a', 100)).toBeNull();
    store.close();
  });

  it('keeps at most answerCacheSize answers, dropping the least recently used', () => {
    const { path, store } = doneStore(2, ['a', 'b', 'c']);
    store.fetch('a', 0);
    store.fetch('b', 0);
    store.fetch('a', 0);
    store.fetch('c', 0);
    bypass(path, 'DELETE FROM keys');
    expect(store.fetch('b', 0)).toBeNull();
    expect(store.fetch('a', 0)).toEqual({ receipt: 'a' });
    expect(store.fetch('c', 0)).toEqual({ receipt: 'c' });
    store.close();
  });

  it('gives every caller its own copy, so mutating one changes no later replay', () => {
    const { store } = doneStore(8, ['a']);
    const first = store.fetch('a', 0);
    if (first === null) throw new Error('expected an answer');
    first.receipt = 'mutated';
    expect(store.fetch('a', 0)).toEqual({ receipt: 'a' });
    store.close();
  });

  it('stops replaying answers its own purge or sweep may have deleted', () => {
    const { store } = doneStore(8, ['a', 'b']);
    store.fetch('a', 0);
    store.fetch('b', 0);
    expect(store.purge(100, 1)).toEqual(['a']);
    expect(store.fetch('a', 50)).toBeNull();
    expect(store.reserve('a', 'other', 200)).toBe(true);
    expect(store.fetch('a', 50)).toBeNull();
    expect(store.sweepBatch(100, 10)).toBe(1);
    expect(store.fetch('b', 50)).toBeNull();
    store.close();
  });

  it('forgets a key whose row another connection purged and this store reserved again', () => {
    const { path, store } = doneStore(8, ['a']);
    store.fetch('a', 0);
    const other = openSqliteStore(path);
    expect(other.purge(100)).toEqual(['a']);
    other.close();
    expect(store.reserve('a', 'd2', 300)).toBe(true);
    expect(store.fetch('a', 0)).toBeNull();
    store.close();
  });

  it('never remembers an answer read inside a transaction that rolls back', () => {
    const path = freshDbPath(dir);
    const store = openSqliteStore<{ receipt: number }>(path, { answerCacheSize: 8 });
    expect(() =>
      store.db.transaction(() => {
        store.reserve('a', 'd', 100);
        store.finish('a', 'd', { receipt: 1 });
        expect(store.fetch('a', 0)).toEqual({ receipt: 1 });
        throw new Error('roll back');
      }),
    ).toThrow('roll back');
    expect(store.fetch('a', 0)).toBeNull();
    store.close();
  });

  it('refuses a bad answerCacheSize before creating the file', () => {
    for (const size of [-1, 1.5, Number.NaN, '8', 10_000_001]) {
      const path = freshDbPath(dir);
      expect(() => openSqliteStore(path, { answerCacheSize: size as number })).toThrow(
        InvalidOptionError,
      );
      expect(existsSync(path)).toBe(false);
    }
  });
});
