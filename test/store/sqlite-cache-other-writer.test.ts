import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { openSqliteStore, type SqliteIdempotencyStore } from '../../src/sqlite/index.js';
import { freshDbPath, tempDir } from '../support/temp.js';

// Another process on the same file retires a row this store replayed: the store must stop
// replaying it as soon as it finds the row absent, by reserving or acquiring the key afresh.
describe('an answer cache over a file another store writes', () => {
  const dir = tempDir();
  let cached: SqliteIdempotencyStore<unknown>;
  let other: SqliteIdempotencyStore<unknown>;
  beforeEach(() => {
    const path = freshDbPath(dir);
    cached = openSqliteStore(path, { answerCacheSize: 64 });
    other = openSqliteStore(path);
    cached.reserve('k', 'v1', 10);
    cached.finish('k', 'v1', { receipt: 1 });
    expect(cached.fetch('k', 1)).toEqual({ receipt: 1 });
    expect(cached.fetch('k', 2)).toEqual({ receipt: 1 });
    expect(other.purge(10)).toEqual(['k']);
  });
  afterEach(() => {
    cached.close();
    other.close();
  });

  it('replays the next answer, not the purged one, once it reserved the key again', () => {
    expect(cached.reserve('k', 'v2', 20)).toBe(true);
    expect(cached.fetch('k', 5)).toBeNull();
    cached.finish('k', 'v2', { receipt: 2 });
    expect(cached.fetch('k', 5)).toEqual({ receipt: 2 });
    expect(cached.fetch('k', 6)).toEqual({ receipt: 2 });
  });

  it('replays the next answer, not the purged one, once it acquired the key again', () => {
    const claim = cached.acquire('k', 'v2', { expires: 20, now: 5, leaseSeconds: 30 });
    expect(claim).toMatchObject({ status: 'acquired', takenOver: false });
    expect(cached.fetch('k', 5)).toBeNull();
    if (claim.status !== 'acquired') throw new Error('expected the key acquired');
    expect(cached.finish('k', 'v2', { receipt: 2 }, claim.fencingToken)).toBe(true);
    expect(cached.fetch('k', 5)).toEqual({ receipt: 2 });
  });

  it('replays nothing of a key the other store claimed and released in between', () => {
    expect(other.reserve('k', 'v2', 20)).toBe(true);
    expect(other.release('k', 'v2')).toBe(true);
    expect(cached.reserve('k', 'v3', 30)).toBe(true);
    expect(cached.fetch('k', 5)).toBeNull();
    cached.finish('k', 'v3', { receipt: 3 });
    expect(cached.fetch('k', 5)).toEqual({ receipt: 3 });
  });
});
