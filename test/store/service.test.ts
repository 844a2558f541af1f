import { existsSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { drizzle } from 'drizzle-orm/better-sqlite3';
import { describe, expect, it } from 'vitest';
import {
  InvalidFingerprintError,
  InvalidKeyError,
  InvalidLimitError,
  InvalidTimeError,
  UnserializableResponseError,
} from '../../src/index.js';
import { applySqliteMigrations, openSqliteStore } from '../../src/sqlite/index.js';
import {
  counts,
  expired,
  fetch,
  finish,
  initDb,
  purge,
  reserve,
  retentionCycle,
} from '../../src/sqlite-file.js';
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
    expect(() => reserve(fresh, 'k', 7 as unknown as string, 1)).toThrow(InvalidFingerprintError);
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

  describe("the seed's table, exactly", () => {
    const SEED_COLUMNS = [
      { cid: 0, name: 'id', type: 'TEXT', notnull: 1, dflt_value: null, pk: 1 },
      { cid: 1, name: 'fingerprint', type: 'TEXT', notnull: 1, dflt_value: null, pk: 0 },
      { cid: 2, name: 'status', type: 'TEXT', notnull: 1, dflt_value: null, pk: 0 },
      { cid: 3, name: 'response', type: 'TEXT', notnull: 0, dflt_value: null, pk: 0 },
      { cid: 4, name: 'expires', type: 'REAL', notnull: 1, dflt_value: null, pk: 0 },
    ];

    function onFile<R>(path: string, use: (client: Database.Database) => R): R {
      const client = new Database(path);
      try {
        return use(client);
      } finally {
        client.close();
      }
    }

    function tableInfo(path: string) {
      return onFile(path, (client) => client.prepare('PRAGMA table_info(keys)').all());
    }

    function journalSize(path: string): number {
      return onFile(
        path,
        (client) =>
          (
            client.prepare('SELECT count(*) AS n FROM __idempotency_migrations').get() as {
              n: number;
            }
          ).n,
      );
    }

    it('initDb creates exactly the five columns, and every function keeps them', () => {
      const path = freshDbPath(dir);
      initDb(path);
      expect(tableInfo(path)).toEqual(SEED_COLUMNS);
      reserve(path, 'a', 'd', 10);
      finish(path, 'a', 'd', { r: 1 });
      fetch(path, 'a', 0);
      expired(path, 10);
      purge(path, 10);
      counts(path);
      retentionCycle(path, 'b');
      initDb(path);
      expect(tableInfo(path)).toEqual(SEED_COLUMNS);
    });

    it('takes a positional five-value insert, and the functions read what it wrote', () => {
      const path = freshDbPath(dir);
      initDb(path);
      onFile(path, (client) => {
        const insert = client.prepare('INSERT INTO keys VALUES (?, ?, ?, ?, ?)');
        insert.run('done-1', 'fp', 'done', '{"receipt":1}', 50);
        insert.run('pending-1', 'fp', 'pending', null, 50);
      });
      expect(fetch(path, 'done-1', 10)).toEqual({ receipt: 1 });
      expect(reserve(path, 'pending-1', 'fp', 50)).toBe(false);
      expect(finish(path, 'pending-1', 'fp', { receipt: 2 })).toBe(true);
      expect(counts(path)).toEqual({ pending: 0, done: 2 });
      expect(expired(path, 50)).toEqual(['done-1', 'pending-1']);
      expect(purge(path, 50, 1)).toEqual(['done-1']);
      expect(readRows(path)).toEqual([
        {
          id: 'pending-1',
          fingerprint: 'fp',
          status: 'done',
          response: '{"receipt":2}',
          expires: 50,
        },
      ]);
    });

    it('work on a file the full store made, leaving its lease columns to it', () => {
      for (const make of [
        (path: string) => openSqliteStore(path).close(),
        (path: string) => onFile(path, (client) => applySqliteMigrations(drizzle({ client }))),
      ]) {
        const path = freshDbPath(dir);
        make(path);
        const full = tableInfo(path) as { name: string }[];
        expect(full.map((column) => column.name)).toEqual([
          'id',
          'fingerprint',
          'status',
          'response',
          'expires',
          'lease_until',
          'attempt',
          'unrecorded',
          'steps',
        ]);
        const recorded = journalSize(path);
        initDb(path);
        expect(reserve(path, 'k', 'd', 10)).toBe(true);
        expect(finish(path, 'k', 'd', { r: 1 })).toBe(true);
        expect(fetch(path, 'k', 5)).toEqual({ r: 1 });
        expect(counts(path)).toEqual({ pending: 0, done: 1 });
        expect(purge(path, 10)).toEqual(['k']);
        expect(retentionCycle(path, 'c')).toBe(true);
        expect(tableInfo(path)).toEqual(full);
        expect(journalSize(path)).toBe(recorded);
        const store = openSqliteStore(path);
        try {
          // The store sees the seed's rows with the lease defaults its own reserve writes.
          expect(store.get('c')).toMatchObject({
            status: 'pending',
            fingerprint: 'v2',
            leaseUntil: null,
            fencingToken: 1,
            unrecorded: false,
          });
        } finally {
          store.close();
        }
      }
    });

    it('leave the lease and steps migrations pending, for the full store to apply without loss', () => {
      const path = freshDbPath(dir);
      reserve(path, 'pending-1', 'fp', 100);
      reserve(path, 'done-1', 'fp', 100);
      finish(path, 'done-1', 'fp', { receipt: 1 });
      const seedRecorded = journalSize(path);
      const rows = readRows(path);
      const store = openSqliteStore<{ receipt: number }>(path);
      try {
        expect(readRows(path)).toEqual(rows);
        expect(store.fetch('done-1', 10)).toEqual({ receipt: 1 });
        expect(store.get('pending-1')).toMatchObject({
          status: 'pending',
          leaseUntil: null,
          fencingToken: 1,
          unrecorded: false,
        });
        // A pending row from before the leases has no lease, so it is never taken over.
        expect(
          store.acquire('pending-1', 'fp', { expires: 100, now: 3e9, leaseSeconds: 1 }),
        ).toMatchObject({ status: 'inProgress' });
        const claimed = store.acquire('fresh', 'fp', { expires: 100, now: 1, leaseSeconds: 30 });
        expect(claimed).toMatchObject({ status: 'acquired', takenOver: false });
      } finally {
        store.close();
      }
      expect(tableInfo(path)).toHaveLength(9);
      // The lease columns and the steps column: the two migrations beyond the five columns.
      expect(journalSize(path)).toBe(seedRecorded + 2);
      // And the seed functions go on working on the upgraded file.
      expect(fetch(path, 'done-1', 10)).toEqual({ receipt: 1 });
      expect(counts(path)).toEqual({ pending: 2, done: 1 });
    });
  });
});
