import type BetterSqlite3 from 'better-sqlite3';
import { and, asc, inArray, lte, sql } from 'drizzle-orm';
import type { BetterSQLite3Database } from 'drizzle-orm/better-sqlite3';
import { getTableConfig } from 'drizzle-orm/sqlite-core';
import { AnswerCache } from '../core/answer-cache.js';
import { drizzleClientOf } from '../core/database-identity.js';
import type { DeploymentReport } from '../core/deployment.js';
import type { EncryptionOption } from '../core/encryption.js';
import { UnrecognisedDatabaseError } from '../core/errors.js';
import { expiredAnswer, liveAnswer } from '../core/key-conditions.js';
import { KeyStatus } from '../core/status.js';
import type { LeasedIdempotencyStore } from '../core/store.js';
import { SyncIdempotencyStore, type SyncKeyStatements } from '../core/sync-store.js';
import { doneIdIndexName } from '../core/table-name.js';
import { assertIntegerOption, DEFAULT_BATCH_MILLIS } from '../core/validation.js';
import type { SqliteStatement } from '../sqlite-dialect/compile.js';
import { compileSqliteStatement } from '../sqlite-dialect/compile.js';
import { type SqliteQueries, sqliteQueries } from '../sqlite-dialect/queries.js';
import { keys as defaultKeys, type SqliteKeysTable } from '../sqlite-dialect/schema.js';
import {
  preparedOnce,
  type SqliteDriver,
  sqliteStatements,
  syncSqliteDriver,
} from '../sqlite-dialect/statements.js';
import { checkSqliteDeployment } from './deployment.js';

/** Any drizzle database over better-sqlite3, whatever schema it was built with. */
// biome-ignore lint/suspicious/noExplicitAny: the store uses its own table, never the app's schema
export type AnyBetterSqliteDatabase = BetterSQLite3Database<any> & {
  $client: BetterSqlite3.Database;
};

/** Options of {@link SqliteIdempotencyStore}. */
export interface SqliteStoreOptions extends EncryptionOption {
  /**
   * Called once by `close()`, e.g. `() => db.$client.close()` to close a connection the store
   * owns. By default `close()` leaves the connection alone: a store built over your database
   * never closes it. `openSqliteStore` closes the connection it opened.
   */
  readonly onClose?: () => void;
  /**
   * How many stored answers `fetch` keeps in memory (least recently used first out), so replays of
   * a key skip the database. Default 0: no cache. The cache is exact for every write made through
   * the store API (see {@link AnswerCache}); each entry holds the answer's JSON text.
   */
  readonly answerCacheSize?: number;
  /**
   * The keys table, from `sqliteKeysTable(name)`. Default: the `keys` table. It must exist, made
   * by `applySqliteMigrations(db, { table })` or by your own drizzle-kit migrations.
   */
  readonly table?: SqliteKeysTable;
}

/** The largest `answerCacheSize` accepted. */
export const MAX_ANSWER_CACHE_SIZE = 10_000_000;

const p = sql.placeholder;

// better-sqlite3 runs every statement synchronously on one connection. `readValue` answers the
// first column of the one row, or `undefined`: a statement in pluck mode builds no row object,
// which is most of a replay's read beyond SQLite's own work. Pluck is a mode of the prepared
// statement, so those statements are prepared apart from the ones that answer rows.
function betterSqliteDriver(
  client: BetterSqlite3.Database,
  onClose: () => void,
): SqliteDriver<'sync'> &
  Required<Pick<SqliteDriver<'sync'>, 'readRow'>> & {
    readValue(statement: SqliteStatement): unknown;
  } {
  const pluck = preparedOnce((text) => client.prepare(text).pluck());
  return {
    ...syncSqliteDriver(client),
    readValue: (statement) => pluck(statement.sql).get(...statement.args),
    // PASSIVE never waits for other connections; outside WAL mode it does nothing. Inside a
    // transaction of the caller's there is nothing committed to copy yet.
    checkpoint: () => {
      if (!client.inTransaction) client.pragma('wal_checkpoint(PASSIVE)');
    },
    close: onClose,
  };
}

// The retention plans only a local SQLite file can afford: a count before the choice, and the
// delete of the chosen ids in the same transaction. The other runtimes send one statement instead.
function compileRetentionPlans(db: AnyBetterSqliteDatabase, keys: SqliteKeysTable) {
  const isExpired = expiredAnswer(keys, p('now'));
  return {
    // How many expired answers there are, counting no further than `cap`: one walk of the
    // retention index's range, stopped at `cap` entries. The statement runs as text, so the
    // column is named in it: drizzle's field name does not reach the driver's row.
    backlogUpTo: compileSqliteStatement(
      db
        .select({ count: sql<number>`count(*)`.as('count') })
        .from(db.select({ id: keys.id }).from(keys).where(isExpired).limit(p('cap')).as('backlog')),
      ['now', 'cap'],
    ),
    // A small backlog: its ids come from the retention index's range and are sorted.
    expiredSorted: compileSqliteStatement(
      db
        .select({ id: keys.id })
        .from(keys)
        .where(isExpired)
        .orderBy(asc(keys.id))
        .limit(p('limit')),
      ['now', 'limit'],
    ),
    // A large backlog: done rows are walked in id order on the partial index of done rows, whose
    // entries carry `expires`, until `limit` expired ones are found; nothing is sorted. The index
    // is named because SQLite, without statistics, would rather sort the retention index's range.
    expiredById: compileSqliteStatement(
      db
        // A column of a table named in raw SQL: drizzle checks plain column fields against `from`.
        .select({ id: sql<string>`${keys.id}` })
        .from(sql`${keys} indexed by ${sql.identifier(doneIdIndexName(getTableConfig(keys).name))}`)
        .where(
          and(sql`${keys.status} = ${sql.raw(`'${KeyStatus.done}'`)}`, lte(keys.expires, p('now'))),
        )
        .orderBy(asc(keys.id))
        .limit(p('limit')),
      ['now', 'limit'],
    ),
    // The ids come as one JSON array so the statement is prepared once for any batch size.
    // The predicate is repeated: only rows that are still expired answers are deleted. Its unary
    // `+` keeps SQLite from answering it with the retention index (a scan of the whole backlog)
    // instead of looking each id up by primary key.
    deleteExpiredIds: compileSqliteStatement(
      db
        .delete(keys)
        .where(
          and(
            inArray(keys.id, sql`(select value from json_each(${p('ids')}))`),
            sql`+${keys.status} = ${KeyStatus.done}`,
            sql`+${keys.expires} <= ${p('now')}`,
          ),
        )
        .returning({ id: keys.id }),
      ['ids', 'now'],
    ),
  };
}

// Up to this many expired answers per id asked for, sorting the backlog is cheapest; beyond it,
// walking done rows in id order finds the lowest expired ids sooner (about limit × done rows ÷
// backlog entries), so the cost of a purge stays flat however large the backlog grows.
const SORTED_BACKLOG_PER_ID = 40;

/**
 * The family's statements on better-sqlite3, with what is this runtime's own: the answer cache,
 * the cheaper of two retention plans, and a sweep batch in an IMMEDIATE transaction with the
 * checkpoint after it. {@link SqliteIdempotencyStore} runs them on the caller's thread, the worker
 * store on its worker thread.
 *
 * @param db - the drizzle database the statements run on
 * @param queries - from `sqliteQueries(db, table)`
 * @param table - the keys table
 * @param cache - the answer cache, when there is one
 * @param onClose - called once by the statements' `close`
 */
export function betterSqliteStatements(
  db: AnyBetterSqliteDatabase,
  queries: SqliteQueries,
  table: SqliteKeysTable,
  cache: AnswerCache | undefined,
  onClose: (() => unknown) | undefined,
): SyncKeyStatements {
  const client = db.$client;
  const driver = betterSqliteDriver(client, () => {
    cache?.clear();
    onClose?.();
  });
  const family = sqliteStatements<'sync'>(driver, queries);
  const plans = compileRetentionPlans(db, table);
  // The answer with its deadline: the answer cache keeps an answer until then, and no longer.
  const cacheableFetch = compileSqliteStatement(
    db
      .select({ response: table.response, expires: table.expires })
      .from(table)
      .where(liveAnswer(table, p('id'), p('now'))),
    ['id', 'now'],
  );
  const ids = (statement: SqliteStatement) => driver.read(statement) as { id: string }[];
  // The lowest `limit` expired ids, ascending, by whichever plan is cheaper for this backlog.
  const candidates = (now: number, limit: number): { id: string }[] => {
    const cap = limit * SORTED_BACKLOG_PER_ID;
    const [backlog] = driver.read(plans.backlogUpTo.bind({ now, cap })) as { count: number }[];
    const plan = (backlog?.count ?? 0) < cap ? plans.expiredSorted : plans.expiredById;
    return ids(plan.bind({ now, limit }));
  };
  // One immediate transaction: the candidates are selected in id order, then deleted with the
  // predicate repeated, and only the ids actually deleted are returned.
  const purge = client.transaction((now: number, limit: number) => {
    const chosen = candidates(now, limit);
    if (chosen.length === 0) return [];
    const list = JSON.stringify(chosen.map((row) => row.id));
    return driver.returning(plans.deleteExpiredIds.bind({ ids: list, now })) as { id: string }[];
  });
  const sweep = client.transaction((statement: SqliteStatement) => driver.changes(statement));
  return {
    ...family,
    // A row inserted was absent, so any answer cached for its key was retired elsewhere.
    reserve: (id, fingerprint, expires) => {
      const inserted = family.reserve(id, fingerprint, expires);
      if (inserted === 1) cache?.forget(id);
      return inserted;
    },
    acquire: (id, fingerprint, lease) => {
      const step = family.acquire(id, fingerprint, lease);
      if ('attempt' in step && Number(step.attempt) === lease.token) cache?.forget(id);
      return step;
    },
    fetch: (id, now) => {
      if (cache === undefined) {
        const text = driver.readValue(queries.fetch.bind({ id, now }));
        return typeof text === 'string' ? text : null;
      }
      const cached = cache.get(id, now);
      if (cached !== undefined) return cached;
      const row = driver.readRow(cacheableFetch.bind({ id, now })) as
        | { response: string | null; expires: number }
        | undefined;
      if (row === undefined || row.response === null) return null;
      // Inside a transaction the row may not be committed yet, and a rollback would un-write it.
      if (!client.inTransaction) cache.remember(id, row.response, row.expires);
      return row.response;
    },
    expired: candidates,
    // An erased answer is gone before its deadline: the cache must not replay it.
    eraseBatch: (prefix, limit) => {
      const erased = family.eraseBatch(prefix, limit);
      for (const row of erased) cache?.forget(row.id);
      return erased;
    },
    purge: (now, limit) => {
      cache?.retire(now);
      return purge.immediate(now, limit);
    },
    sweepBatch: (now, limit) => {
      cache?.retire(now);
      const deleted = sweep.immediate(queries.sweepBatch.bind({ now, limit }));
      if (deleted > 0) driver.checkpoint?.();
      return deleted;
    },
  };
}

/**
 * Refuses what a store could not keep answers in: anything but a drizzle database over a
 * better-sqlite3 `Database`, and an anonymous temporary database (`new Database()`, which is what
 * drizzle 1.0 opens for `drizzle(client)`): its rows vanish on close. `:memory:` asked for by name
 * is kept, since the caller chose it.
 */
function assertBetterSqliteFile(db: unknown): void {
  const client = drizzleClientOf(db, 'better-sqlite3') as Partial<BetterSqlite3.Database> | null;
  if (
    typeof client !== 'object' ||
    client === null ||
    typeof client.prepare !== 'function' ||
    typeof client.pragma !== 'function' ||
    typeof client.name !== 'string'
  ) {
    throw new UnrecognisedDatabaseError(
      'the drizzle database does not run on a better-sqlite3 Database; make it with drizzle({ client: new Database(path) }) from drizzle-orm/better-sqlite3',
    );
  }
  if (client.name === '') {
    throw new UnrecognisedDatabaseError(
      'the drizzle database runs on an anonymous temporary better-sqlite3 database, which loses every answer when it closes; make it with drizzle({ client: new Database(path) })',
    );
  }
}

/**
 * The idempotency store on SQLite, over a drizzle better-sqlite3 database. Every operation is a
 * query prepared once and runs synchronously. The table must exist: use `openSqliteStore`, or
 * `applySqliteMigrations`, or your own drizzle-kit migrations with the exported `keys` table (or
 * one built by `sqliteKeysTable(name)`, given as `{ table }`).
 *
 * @typeParam T - the type of the stored responses
 * @example
 * ```ts
 * import Database from 'better-sqlite3';
 * import { drizzle } from 'drizzle-orm/better-sqlite3';
 * import { applySqliteMigrations, SqliteIdempotencyStore } from 'drizzle-idempotency/sqlite';
 *
 * const db = drizzle({ client: new Database('app.db') });
 * applySqliteMigrations(db);
 * const store = new SqliteIdempotencyStore<{ receipt: number }>(db);
 * if (store.reserve('order-42', fingerprint, now + 86_400)) {
 *   store.finish('order-42', fingerprint, { receipt: 1 });
 * }
 * store.fetch('order-42', now); // { receipt: 1 }
 * ```
 */
export class SqliteIdempotencyStore<T = unknown>
  extends SyncIdempotencyStore<T>
  implements LeasedIdempotencyStore<T>
{
  /** {@inheritDoc IdempotencyStore.sweepBatchMillis} */
  readonly sweepBatchMillis: number = DEFAULT_BATCH_MILLIS;
  readonly #db: AnyBetterSqliteDatabase;
  readonly #table: SqliteKeysTable;

  /**
   * @param db - a drizzle database over better-sqlite3; the store shares its connection
   * @param options - see {@link SqliteStoreOptions}
   * @throws {@link InvalidOptionError} for an `answerCacheSize` out of range
   * @throws {@link UnrecognisedDatabaseError} when `db` is not a drizzle database over a
   * better-sqlite3 `Database`, or runs on an anonymous temporary one
   */
  constructor(db: AnyBetterSqliteDatabase, options: SqliteStoreOptions = {}) {
    assertBetterSqliteFile(db);
    const cacheSize = options.answerCacheSize ?? 0;
    assertIntegerOption(cacheSize, 'answerCacheSize', 0, MAX_ANSWER_CACHE_SIZE);
    const table = options.table ?? defaultKeys;
    const cache = cacheSize > 0 ? new AnswerCache(cacheSize) : undefined;
    const queries = sqliteQueries(db, table);
    super(betterSqliteStatements(db, queries, table, cache, options.onClose), options.encryption);
    this.#db = db;
    this.#table = table;
  }

  /** The drizzle database the store runs on; use it to run your own queries on the same connection. */
  get db(): AnyBetterSqliteDatabase {
    return this.#db;
  }

  /** The keys table the store keeps its rows in; `sqliteTransaction` records there. */
  get table(): SqliteKeysTable {
    return this.#table;
  }

  /**
   * Reads this connection's `journal_mode` and `synchronous`: see `checkSqliteDeployment`.
   * `openSqliteStore` runs it at open.
   *
   * @example
   * ```ts
   * const { findings } = store.checkDeployment();
   * ```
   */
  checkDeployment(): DeploymentReport {
    return checkSqliteDeployment(this.#db.$client);
  }

  /**
   * {@inheritDoc IdempotencyStore.purge}
   *
   * One immediate transaction: the candidates are selected in id order, then deleted with the
   * predicate repeated, and only the ids actually deleted are returned, still ascending.
   */
  override purge(now: number, limit?: number): string[] {
    return super.purge(now, limit);
  }
}
