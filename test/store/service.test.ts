import { existsSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import {
  InvalidDigestError,
  InvalidKeyError,
  InvalidLimitError,
  InvalidTimeError,
  UnserializableResponseError,
} from '../../src/index.js';
import {
  counts,
  expired,
  fetch,
  finish,
  initDb,
  purge,
  reserve,
  retentionCycle,
} from '../../src/service.js';
import { readRows } from '../support/sqlite-harness.js';
import { freshDbPath, tempDir } from '../support/temp.js';

const dir = tempDir();

function openFileDescriptors(): number {
  return readdirSync('/proc/self/fd').length;
}

describe('seed-shaped functions', () => {
  it('walk one key through the contract on a file', () => {
    const path = freshDbPath(dir);
    initDb(path);
    initDb(path);
    expect(counts(path)).toEqual({ pending: 0, done: 0 });
    expect(reserve(path, 'order-1', 'v1', 10)).toBe(true);
    expect(reserve(path, 'order-1', 'v1', 10)).toBe(false);
    expect(fetch(path, 'order-1', 0)).toBeNull();
    expect(finish(path, 'order-1', 'other', { receipt: 2 })).toBe(false);
    expect(finish(path, 'order-1', 'v1', { receipt: 1 })).toBe(true);
    expect(finish(path, 'order-1', 'v1', { receipt: 3 })).toBe(false);
    expect(fetch(path, 'order-1', 9.5)).toEqual({ receipt: 1 });
    expect(fetch(path, 'order-1', 10)).toBeNull();
    expect(counts(path)).toEqual({ pending: 0, done: 1 });
    expect(expired(path, 9)).toEqual([]);
    expect(expired(path, 10)).toEqual(['order-1']);
    expect(purge(path, 10)).toEqual(['order-1']);
    expect(counts(path)).toEqual({ pending: 0, done: 0 });
  });

  it('use the default limit of 10 and order ids by bytes', () => {
    const path = freshDbPath(dir);
    for (const key of ['a9', 'a10', 'b', 'c', 'd', 'e', 'f', 'g', 'h', 'i', 'j', 'k']) {
      reserve(path, key, 'd', 1);
      finish(path, key, 'd', 1);
    }
    expect(expired(path, 1)).toEqual(['a10', 'a9', 'b', 'c', 'd', 'e', 'f', 'g', 'h', 'i']);
    expect(purge(path, 1)).toEqual(['a10', 'a9', 'b', 'c', 'd', 'e', 'f', 'g', 'h', 'i']);
    expect(purge(path, 1, 100)).toEqual(['j', 'k']);
  });

  it('retentionCycle returns true and leaves the key pending with v2 until 20', () => {
    const path = freshDbPath(dir);
    initDb(path);
    expect(retentionCycle(path, 'order-9')).toBe(true);
    expect(readRows(path)).toEqual([
      { id: 'order-9', fingerprint: 'v2', status: 'pending', response: null, expires: 20 },
    ]);
  });

  it('never purge a pending row', () => {
    const path = freshDbPath(dir);
    reserve(path, 'busy', 'd', 1);
    expect(purge(path, 1000, 100)).toEqual([]);
    expect(expired(path, 1000, 100)).toEqual([]);
    expect(counts(path)).toEqual({ pending: 1, done: 0 });
  });

  it('refuse bad input without creating or changing the file', () => {
    const fresh = freshDbPath(dir);
    expect(() => reserve(fresh, '', 'd', 1)).toThrow(InvalidKeyError);
    expect(() => reserve(fresh, 'k', 7 as unknown as string, 1)).toThrow(InvalidDigestError);
    expect(() => reserve(fresh, 'k', 'd', Number.NaN)).toThrow(InvalidTimeError);
    expect(() => finish(fresh, 'k', 'd', { n: 1n })).toThrow(UnserializableResponseError);
    expect(() => fetch(fresh, 'k', Infinity)).toThrow(InvalidTimeError);
    expect(() => expired(fresh, 1, 0)).toThrow(InvalidLimitError);
    expect(() => purge(fresh, 1, true as unknown as number)).toThrow(InvalidLimitError);
    expect(() => purge(fresh, 1, null as unknown as number)).toThrow(InvalidLimitError);
    expect(() => retentionCycle(fresh, null as unknown as string)).toThrow(InvalidKeyError);
    expect(existsSync(fresh)).toBe(false);

    const path = freshDbPath(dir);
    reserve(path, 'p', 'd', 100);
    const before = readRows(path);
    expect(() => finish(path, 'p', 'd', { total: Number.NaN })).toThrow(
      UnserializableResponseError,
    );
    expect(() => finish(path, 'p', 'd', undefined)).toThrow(UnserializableResponseError);
    expect(() => purge(path, 1000, 101)).toThrow(InvalidLimitError);
    expect(readRows(path)).toEqual(before);
  });

  it('report a missing directory as a typed error', () => {
    expect(() => initDb(join(dir, 'missing', 'x.db'))).toThrow(/does not exist/);
  });

  // 3,000 opens, each migrating or checking a fresh file: minutes on a loaded two-core machine.
  it('survive 1,000 open/close cycles on fresh temp files without leaking handles', () => {
    const before = openFileDescriptors();
    for (let i = 0; i < 1000; i++) {
      const path = freshDbPath(dir);
      expect(reserve(path, `k${i}`, 'd', 5)).toBe(true);
      expect(finish(path, `k${i}`, 'd', { i })).toBe(true);
      expect(counts(path)).toEqual({ pending: 0, done: 1 });
    }
    expect(openFileDescriptors()).toBeLessThanOrEqual(before);
  }, 300_000);
});
