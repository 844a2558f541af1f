/**
 * Synchronous functions over a SQLite file, database path first. Each call opens the file,
 * applies the migrations if needed, does one thing and closes it again, so any number of files can
 * be used without leaking handles. For a long-lived service prefer one store from
 * `openSqliteStore`: it keeps its connection and prepared queries.
 *
 * Arguments are validated before the file is opened, so bad input never creates or changes it.
 *
 * @module
 */
import { serializeResponse } from './core/json.js';
import type { StatusCounts } from './core/store.js';
import {
  assertDigest,
  assertKey,
  assertLimit,
  assertTime,
  DEFAULT_LIMIT,
} from './core/validation.js';
import { openSqliteStore } from './sqlite/open.js';
import type { SqliteIdempotencyStore } from './sqlite/store.js';

function withStore<R>(path: string, use: (store: SqliteIdempotencyStore) => R): R {
  const store = openSqliteStore(path);
  try {
    return use(store);
  } finally {
    store.close();
  }
}

/**
 * Creates the `keys` table and its index in the file at `path` (creating the file if needed).
 * Idempotent; existing rows are never touched.
 *
 * @example
 * ```ts
 * initDb('./idempotency.db');
 * ```
 */
export function initDb(path: string): void {
  withStore(path, () => undefined);
}

/**
 * Reserves `key` as `pending` for the request whose payload digest is `digest`.
 *
 * @returns `true` if this call inserted the key, `false` if it existed (whatever its state)
 * @example
 * ```ts
 * if (reserve('./idempotency.db', 'order-42', digest, now + 86_400)) chargeCard();
 * ```
 */
export function reserve(path: string, key: string, digest: string, expires: number): boolean {
  assertKey(key);
  assertDigest(digest);
  assertTime(expires, 'expires');
  return withStore(path, (store) => store.reserve(key, digest, expires));
}

/**
 * Stores `response` for the `pending` row with this key and digest, making it `done`.
 *
 * @returns `true` if the row was finished; `false` (nothing changed) for any other row
 * @example
 * ```ts
 * finish('./idempotency.db', 'order-42', digest, { receipt: 1 });
 * ```
 */
export function finish(path: string, key: string, digest: string, response: unknown): boolean {
  assertKey(key);
  assertDigest(digest);
  serializeResponse(response);
  return withStore(path, (store) => store.finish(key, digest, response));
}

/**
 * The stored answer for `key` if it is `done` and `expires > now`, otherwise `null`.
 *
 * @example
 * ```ts
 * fetch('./idempotency.db', 'order-42', now); // { receipt: 1 }
 * ```
 */
export function fetch(path: string, key: string, now: number): unknown {
  assertKey(key);
  assertTime(now, 'now');
  return withStore(path, (store) => store.fetch(key, now));
}

/**
 * Ids of `done` rows with `expires <= now`, ascending, at most `limit` (an integer 1–100).
 *
 * @example
 * ```ts
 * expired('./idempotency.db', now, 50);
 * ```
 */
export function expired(path: string, now: number, limit: number = DEFAULT_LIMIT): string[] {
  assertLimit(limit);
  assertTime(now, 'now');
  return withStore(path, (store) => store.expired(now, limit));
}

/**
 * Deletes up to `limit` expired `done` rows (ascending by id) in one transaction and returns the
 * ids deleted. Never deletes a `pending` row.
 *
 * @example
 * ```ts
 * purge('./idempotency.db', now, 100);
 * ```
 */
export function purge(path: string, now: number, limit: number = DEFAULT_LIMIT): string[] {
  assertLimit(limit);
  assertTime(now, 'now');
  return withStore(path, (store) => store.purge(now, limit));
}

/**
 * The number of `pending` and `done` rows.
 *
 * @example
 * ```ts
 * counts('./idempotency.db'); // { pending: 0, done: 3 }
 * ```
 */
export function counts(path: string): StatusCounts {
  return withStore(path, (store) => store.counts());
}

/**
 * Shows the limit of retention on an empty store: `key` is reserved with `'v1'` until 10,
 * finished with `{ receipt: 1 }`, purged at `now = 10`, then reserved again with `'v2'` until 20.
 * Once its answer is purged a key is a new request, so this returns `true` and leaves the row
 * `pending` with fingerprint `'v2'`: the retention period must outlast every retry.
 *
 * @example
 * ```ts
 * retentionCycle('./fresh.db', 'order-42'); // true
 * ```
 */
export function retentionCycle(path: string, key: string): boolean {
  assertKey(key);
  return withStore(path, (store) => store.retentionCycle(key));
}
