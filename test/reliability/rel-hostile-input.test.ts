import { copyFileSync, existsSync, readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import {
  DatabaseOpenError,
  type IdempotencyError,
  type IdempotencyStore,
  InvalidFingerprintError,
  InvalidKeyError,
  InvalidLimitError,
  InvalidOptionError,
  InvalidTimeError,
  StoreClosedError,
  UnserializableResponseError,
} from '../../src/index.js';
import { openPgStore } from '../../src/pg/index.js';
import { openSqliteStore } from '../../src/sqlite/index.js';
import * as service from '../../src/sqlite-file.js';
import { readRows } from '../support/sqlite-harness.js';
import { freshDbPath, tempDir } from '../support/temp.js';

const dir = tempDir();

// A store with a row in every state, closed cleanly: every case starts from a copy of it.
const template = freshDbPath(dir);
{
  const store = openSqliteStore(template);
  store.reserve('pending', 'd', 100);
  store.reserve('done', 'd', 100);
  store.finish('done', 'd', { receipt: 1 });
  store.reserve('old', 'd', 1);
  store.finish('old', 'd', { receipt: 0 });
  store.close();
}

function nested(depth: number): unknown {
  let value: unknown = 1;
  for (let i = 0; i < depth; i++) value = [value];
  return value;
}

function cyclic(): unknown {
  const value: Record<string, unknown> = { a: 1 };
  value.self = { back: value };
  return value;
}

type ErrorClass = new (...args: never[]) => IdempotencyError;
// Wrong-typed arguments go through `unknown` on purpose: they are the hostile input.
type Loose = Record<string, (...args: unknown[]) => unknown>;
const loose = (store: IdempotencyStore): Loose => store as unknown as Loose;

/** Calls on an open store over the file: the table must be unchanged afterwards. */
const STORE_CASES: [string, (store: Loose) => unknown, ErrorClass][] = [
  ['reserve: empty key', (s) => s.reserve?.('', 'd', 1), InvalidKeyError],
  ['reserve: key with NUL', (s) => s.reserve?.('pending\u0000x', 'd', 1), InvalidKeyError],
  ['reserve: lone surrogate', (s) => s.reserve?.('k\uD800', 'd', 1), InvalidKeyError],
  ['reserve: key as a Buffer', (s) => s.reserve?.(Buffer.from('k'), 'd', 1), InvalidKeyError],
  ['reserve: key as a String object', (s) => s.reserve?.(new String('k'), 'd', 1), InvalidKeyError],
  ['reserve: key as a number', (s) => s.reserve?.(42, 'd', 1), InvalidKeyError],
  ['reserve: empty fingerprint', (s) => s.reserve?.('k', '', 1), InvalidFingerprintError],
  [
    'reserve: fingerprint as an object',
    (s) => s.reserve?.('k', { sha: 1 }, 1),
    InvalidFingerprintError,
  ],
  ['reserve: expires NaN', (s) => s.reserve?.('k', 'd', Number.NaN), InvalidTimeError],
  ['reserve: expires Infinity', (s) => s.reserve?.('k', 'd', Infinity), InvalidTimeError],
  ['reserve: expires as a string', (s) => s.reserve?.('k', 'd', '100'), InvalidTimeError],
  ['reserve: expires as a BigInt', (s) => s.reserve?.('k', 'd', 100n), InvalidTimeError],
  ['reserve: expires as a Date', (s) => s.reserve?.('k', 'd', new Date()), InvalidTimeError],
  [
    'finish: undefined response',
    (s) => s.finish?.('pending', 'd', undefined),
    UnserializableResponseError,
  ],
  [
    'finish: a function inside',
    (s) => s.finish?.('pending', 'd', { f: () => 1 }),
    UnserializableResponseError,
  ],
  ['finish: a cycle', (s) => s.finish?.('pending', 'd', cyclic()), UnserializableResponseError],
  [
    'finish: Infinity inside',
    (s) => s.finish?.('pending', 'd', { n: -Infinity }),
    UnserializableResponseError,
  ],
  ['finish: a Set', (s) => s.finish?.('pending', 'd', new Set([1])), UnserializableResponseError],
  [
    'finish: a class instance',
    (s) =>
      s.finish?.(
        'pending',
        'd',
        new (class Money {
          amount = 1;
        })(),
      ),
    UnserializableResponseError,
  ],
  [
    'finish: toJSON giving undefined',
    (s) => s.finish?.('pending', 'd', { toJSON: () => undefined }),
    UnserializableResponseError,
  ],
  [
    'finish: 100,000 levels of nesting',
    (s) => s.finish?.('pending', 'd', nested(100_000)),
    UnserializableResponseError,
  ],
  [
    'finish: a symbol-keyed property',
    (s) => s.finish?.('pending', 'd', { [Symbol('s')]: 1 }),
    UnserializableResponseError,
  ],
  [
    'finish: bad fingerprint on a pending row',
    (s) => s.finish?.('pending', '', { ok: 1 }),
    InvalidFingerprintError,
  ],
  ['fetch: now NaN', (s) => s.fetch?.('done', Number.NaN), InvalidTimeError],
  ['fetch: now as a string', (s) => s.fetch?.('done', '0'), InvalidTimeError],
  ['expired: limit 0', (s) => s.expired?.(10, 0), InvalidLimitError],
  ['expired: limit 101', (s) => s.expired?.(10, 101), InvalidLimitError],
  ['purge: limit 2.5', (s) => s.purge?.(10, 2.5), InvalidLimitError],
  ['purge: limit true', (s) => s.purge?.(10, true), InvalidLimitError],
  ['purge: limit "5"', (s) => s.purge?.(10, '5'), InvalidLimitError],
  ['purge: limit null', (s) => s.purge?.(10, null), InvalidLimitError],
  ['purge: limit NaN', (s) => s.purge?.(10, Number.NaN), InvalidLimitError],
  ['purge: now -Infinity', (s) => s.purge?.(-Infinity), InvalidTimeError],
  [
    'purge: now Infinity (would purge everything)',
    (s) => s.purge?.(Infinity, 100),
    InvalidTimeError,
  ],
  ['sweepBatch: batch 0', (s) => s.sweepBatch?.(10, 0), InvalidOptionError],
  ['sweepBatch: batch 10,001', (s) => s.sweepBatch?.(10, 10_001), InvalidOptionError],
  ['sweepBatch: batch 1.5', (s) => s.sweepBatch?.(10, 1.5), InvalidOptionError],
  ['sweepBatch: now as a string', (s) => s.sweepBatch?.('10', 5), InvalidTimeError],
  ['stats: now null', (s) => s.stats?.(null), InvalidTimeError],
  ['release: empty key', (s) => s.release?.('', 'd'), InvalidKeyError],
  ['release: fingerprint as a number', (s) => s.release?.('pending', 5), InvalidFingerprintError],
  ['get: key undefined', (s) => s.get?.(undefined), InvalidKeyError],
];

/** Calls of the seed-shaped functions: the file must be byte-for-byte unchanged. */
const SERVICE_CASES: [string, (path: string) => unknown, ErrorClass][] = [
  ['service.reserve: empty key', (p) => service.reserve(p, '', 'd', 1), InvalidKeyError],
  [
    'service.reserve: expires NaN',
    (p) => service.reserve(p, 'k', 'd', Number.NaN),
    InvalidTimeError,
  ],
  [
    'service.finish: NaN response',
    (p) => service.finish(p, 'pending', 'd', Number.NaN),
    UnserializableResponseError,
  ],
  [
    'service.finish: deep nesting',
    (p) => service.finish(p, 'pending', 'd', nested(50_000)),
    UnserializableResponseError,
  ],
  [
    'service.fetch: now as a string',
    (p) => service.fetch(p, 'done', '0' as unknown as number),
    InvalidTimeError,
  ],
  ['service.expired: limit 0', (p) => service.expired(p, 10, 0), InvalidLimitError],
  ['service.purge: limit 1000', (p) => service.purge(p, 10, 1000), InvalidLimitError],
  ['service.purge: now NaN', (p) => service.purge(p, Number.NaN), InvalidTimeError],
  ['service.retentionCycle: NUL key', (p) => service.retentionCycle(p, '\u0000'), InvalidKeyError],
  ['service.counts: the path of a directory', () => service.counts(dir), DatabaseOpenError],
  ['service.initDb: an empty path', () => service.initDb(''), DatabaseOpenError],
  [
    'service.reserve: a path in a missing directory',
    (p) => service.reserve(`${p}.missing/x.db`, 'k', 'd', 1),
    DatabaseOpenError,
  ],
];

/** Opening with bad options: refused before the path is touched. */
const OPEN_CASES: [string, (path: string) => unknown, ErrorClass][] = [
  ['open: busyTimeoutMs -1', (p) => openSqliteStore(p, { busyTimeoutMs: -1 }), InvalidOptionError],
  [
    'open: busyTimeoutMs "5000"',
    (p) => openSqliteStore(p, { busyTimeoutMs: '5000' as unknown as number }),
    InvalidOptionError,
  ],
  [
    'open: synchronous "normal" (lower case)',
    (p) => openSqliteStore(p, { synchronous: 'normal' as 'NORMAL' }),
    InvalidOptionError,
  ],
];

// Nothing listens on port 1: a call that got as far as connecting would fail with
// DatabaseOpenError, so the typed option error shows the input was refused before any connection.
const NOWHERE = 'postgres://postgres@127.0.0.1:1/test';

/** Opening a PostgreSQL store with bad options: refused before connecting. */
const PG_OPEN_CASES: [string, () => Promise<unknown>, ErrorClass][] = [
  ['openPgStore: an empty schema', () => openPgStore(NOWHERE, { schema: '' }), InvalidOptionError],
  [
    'openPgStore: a 64-byte schema',
    () => openPgStore(NOWHERE, { schema: 's'.repeat(64) }),
    InvalidOptionError,
  ],
  [
    'openPgStore: a schema of 22 three-byte characters',
    () => openPgStore(NOWHERE, { schema: '€'.repeat(22) }),
    InvalidOptionError,
  ],
  [
    'openPgStore: a schema with NUL',
    () => openPgStore(NOWHERE, { schema: 'a\u0000b' }),
    InvalidOptionError,
  ],
  ['openPgStore: a pool of 0', () => openPgStore(NOWHERE, { poolSize: 0 }), InvalidOptionError],
  ['openPgStore: an empty connection string', () => openPgStore(''), DatabaseOpenError],
];

function fileState(path: string) {
  return {
    bytes: readFileSync(path),
    wal: existsSync(`${path}-wal`),
    shm: existsSync(`${path}-shm`),
  };
}

describe('hostile input: a typed error, and nothing changed', () => {
  it('covers at least 30 bad inputs', () => {
    expect(STORE_CASES.length + SERVICE_CASES.length + OPEN_CASES.length).toBeGreaterThanOrEqual(
      30,
    );
  });

  it.each(STORE_CASES)('%s', (_, call, errorClass) => {
    const path = freshDbPath(dir);
    copyFileSync(template, path);
    const store = openSqliteStore(path);
    const before = readRows(path);
    expect(() => call(loose(store))).toThrow(errorClass);
    expect(readRows(path)).toEqual(before);
    // The store still works after refusing.
    expect(store.counts()).toEqual({ pending: 1, done: 2 });
    store.close();
    expect(() => call(loose(store))).toThrow(
      errorClass === StoreClosedError ? StoreClosedError : Error,
    );
  });

  it.each([...SERVICE_CASES, ...OPEN_CASES])('%s', (_, call, errorClass) => {
    const path = freshDbPath(dir);
    copyFileSync(template, path);
    const before = fileState(path);
    expect(() => call(path)).toThrow(errorClass);
    expect(fileState(path)).toEqual(before);
  });

  it.each(PG_OPEN_CASES)('%s', async (_, call, errorClass) => {
    await expect(call()).rejects.toBeInstanceOf(errorClass);
  });

  it('openPgStore with good options does try to connect there (so the refusals above came first)', async () => {
    await expect(openPgStore(NOWHERE, { schema: 'fine' })).rejects.toBeInstanceOf(
      DatabaseOpenError,
    );
  });

  it('a closed store refuses every call with StoreClosedError, whatever the input', () => {
    const path = freshDbPath(dir);
    copyFileSync(template, path);
    const store = openSqliteStore(path);
    store.close();
    expect(() => store.reserve('k', 'd', 1)).toThrow(StoreClosedError);
    expect(() => store.purge(10)).toThrow(StoreClosedError);
    expect(readRows(path)).toEqual(readRows(template));
  });
});
