/**
 * Synchronous functions over a SQLite file, database path first. Each call opens the file,
 * applies the migrations if needed, does one thing and closes it again, so any number of files can
 * be used without leaking handles. For a long-lived service prefer one store from
 * `openSqliteStore`: it keeps its connection and prepared queries.
 *
 * The table is exactly `keys(id TEXT PRIMARY KEY, fingerprint TEXT NOT NULL, status TEXT NOT NULL,
 * response TEXT, expires REAL NOT NULL)`: a file these functions create has those five columns
 * and no others, so a positional `INSERT INTO keys VALUES (?, ?, ?, ?, ?)` works on it. They keep
 * working on a file the full store has since given its lease columns, and the full store upgrades
 * a file they made when it first opens it.
 *
 * Arguments are validated before the file is opened, so bad input never creates or changes it.
 *
 * @module
 */
import { and, asc, eq, gt, inArray, sql } from 'drizzle-orm';
import { parseResponse, serializeResponse } from './core/json.js';
import { expiredAnswer } from './core/key-conditions.js';
import { RETENTION_CYCLE } from './core/retention-cycle.js';
import { countByStatus, KeyStatus } from './core/status.js';
import type { StatusCounts } from './core/store.js';
import {
  assertFingerprint,
  assertKey,
  assertLimit,
  assertTime,
  DEFAULT_LIMIT,
} from './core/validation.js';
import { applySqliteMigrationSet } from './sqlite/migrate.js';
import { openSqliteDatabase } from './sqlite/open.js';
import type { AnyBetterSqliteDatabase } from './sqlite/store.js';
import { fiveColumnKeys, fiveColumnMigrations } from './sqlite-dialect/seed.js';

// Each function builds only the statements it runs, on the five columns of the contract: a file
// opened for one call pays for nothing else, and no statement names a column the file may not have.
// What the statements need of a database: a transaction has it too.
type FileDb = Pick<AnyBetterSqliteDatabase, 'select' | 'insert' | 'update' | 'delete'>;

function withFile<R>(path: string, use: (db: AnyBetterSqliteDatabase) => R): R {
  const db = openSqliteDatabase(path, {}, (opened) =>
    applySqliteMigrationSet(opened, fiveColumnMigrations),
  );
  try {
    return use(db);
  } finally {
    db.$client.close();
  }
}

function reserveOn(db: FileDb, key: string, fingerprint: string, expires: number) {
  const inserted = db
    .insert(fiveColumnKeys)
    .values({ id: key, fingerprint: fingerprint, status: KeyStatus.pending, expires })
    .onConflictDoNothing()
    .run();
  return inserted.changes === 1;
}

function finishOn(db: FileDb, key: string, fingerprint: string, response: unknown) {
  const finished = db
    .update(fiveColumnKeys)
    .set({ status: KeyStatus.done, response: serializeResponse(response) })
    .where(
      and(
        eq(fiveColumnKeys.id, key),
        eq(fiveColumnKeys.fingerprint, fingerprint),
        eq(fiveColumnKeys.status, KeyStatus.pending),
      ),
    )
    .run();
  return finished.changes === 1;
}

function expiredOn(db: FileDb, now: number, limit: number): string[] {
  return db
    .select({ id: fiveColumnKeys.id })
    .from(fiveColumnKeys)
    .where(expiredAnswer(fiveColumnKeys, now))
    .orderBy(asc(fiveColumnKeys.id))
    .limit(limit)
    .all()
    .map((row) => row.id);
}

// The candidates in id order, then deleted with the predicate repeated, in one immediate
// transaction: only the ids actually deleted are returned, still ascending.
function purgeOn(db: AnyBetterSqliteDatabase, now: number, limit: number): string[] {
  return db.transaction(
    (tx) => {
      const candidates = expiredOn(tx, now, limit);
      if (candidates.length === 0) return [];
      const deleted = new Set(
        tx
          .delete(fiveColumnKeys)
          .where(and(inArray(fiveColumnKeys.id, candidates), expiredAnswer(fiveColumnKeys, now)))
          .returning({ id: fiveColumnKeys.id })
          .all()
          .map((row) => row.id),
      );
      return candidates.filter((id) => deleted.has(id));
    },
    { behavior: 'immediate' },
  );
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
  withFile(path, () => undefined);
}

/**
 * Reserves `key` as `pending` for the request whose payload fingerprint is `fingerprint`.
 *
 * @returns `true` if this call inserted the key, `false` if it existed (whatever its state)
 * @example
 * ```ts
 * if (reserve('./idempotency.db', 'order-42', fingerprint, now + 86_400)) chargeCard();
 * ```
 */
export function reserve(path: string, key: string, fingerprint: string, expires: number): boolean {
  assertKey(key);
  assertFingerprint(fingerprint);
  assertTime(expires, 'expires');
  return withFile(path, (db) => reserveOn(db, key, fingerprint, expires));
}

/**
 * Stores `response` for the `pending` row with this key and fingerprint, making it `done`.
 *
 * @returns `true` if the row was finished; `false` (nothing changed) for any other row
 * @example
 * ```ts
 * finish('./idempotency.db', 'order-42', fingerprint, { receipt: 1 });
 * ```
 */
export function finish(path: string, key: string, fingerprint: string, response: unknown): boolean {
  assertKey(key);
  assertFingerprint(fingerprint);
  serializeResponse(response);
  return withFile(path, (db) => finishOn(db, key, fingerprint, response));
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
  return withFile(path, (db) => {
    const [row] = db
      .select({ response: fiveColumnKeys.response })
      .from(fiveColumnKeys)
      .where(
        and(
          eq(fiveColumnKeys.id, key),
          eq(fiveColumnKeys.status, KeyStatus.done),
          gt(fiveColumnKeys.expires, now),
        ),
      )
      .all();
    return row?.response == null ? null : parseResponse(row.response);
  });
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
  return withFile(path, (db) => expiredOn(db, now, limit));
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
  return withFile(path, (db) => purgeOn(db, now, limit));
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
  return withFile(path, (db) =>
    countByStatus(
      db
        .select({ status: fiveColumnKeys.status, count: sql<number>`count(*)` })
        .from(fiveColumnKeys)
        .groupBy(fiveColumnKeys.status)
        .all(),
    ),
  );
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
  const { first, purgeAt, second } = RETENTION_CYCLE;
  return withFile(path, (db) => {
    reserveOn(db, key, first.fingerprint, first.expires);
    finishOn(db, key, first.fingerprint, first.response);
    purgeOn(db, purgeAt, DEFAULT_LIMIT);
    return reserveOn(db, key, second.fingerprint, second.expires);
  });
}
