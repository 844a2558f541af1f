import type BetterSqlite3 from 'better-sqlite3';
import type { MigrationFile } from '../core/journal.js';
import {
  type MigrationSession,
  type MigrationStatus,
  migrateSync,
  migrationStatus,
  runSync,
} from '../core/migrator.js';
import { sqliteMigrations } from '../generated/migrations.js';
import type { SqliteStatement } from '../sqlite-dialect/compile.js';
import {
  adoptableBookkeeping,
  adoptableKeysTable,
  type SqliteMigrationOptions,
  sqliteTableName,
} from '../sqlite-dialect/migrate.js';
import {
  sqliteMigrationPlan,
  sqliteMigrationStatements,
} from '../sqlite-dialect/migration-dialect.js';
import type { AnyBetterSqliteDatabase } from './store.js';

/** A better-sqlite3 connection as the migrator's synchronous session. */
function sessionOf(client: BetterSqlite3.Database): MigrationSession<SqliteStatement, true> {
  return {
    rows: (statement) => client.prepare(statement.sql).all(...statement.args) as object[],
    exec: (statement) => {
      client.prepare(statement.sql).run(...statement.args);
    },
  };
}

/**
 * Checks, without writing, that an existing keys table is one the store can adopt: exactly the
 * columns of the contract with their affinities (the lease columns may be missing, on a table from
 * before their migration), and `id` as the primary key (the primary key is
 * what makes `reserve` atomic).
 *
 * @throws {@link SchemaMismatchError} naming what differs
 */
export function assertAdoptableSqliteKeysTable(
  client: BetterSqlite3.Database,
  options: SqliteMigrationOptions = {},
): void {
  runSync(adoptableKeysTable(sqliteTableName(options)), sessionOf(client));
}

/**
 * Checks, without writing, that what the migrations record and create is free or already ours:
 * the library's journal must have its `hash` and `created_at` columns, and the retention index's
 * name must not belong to another table (`CREATE INDEX IF NOT EXISTS` would silently skip it,
 * leaving every purge a full scan). The application's own `__drizzle_migrations` is not ours to
 * judge and is not looked at.
 *
 * @throws {@link SchemaMismatchError} naming what is in the way
 */
export function assertAdoptableBookkeeping(
  client: BetterSqlite3.Database,
  options: SqliteMigrationOptions = {},
): void {
  runSync(adoptableBookkeeping(sqliteTableName(options)), sessionOf(client));
}

/**
 * Applies the committed drizzle-kit migrations to a better-sqlite3 database, for the keys table
 * `options.table` (default `keys`; the migrations are rewritten for another name). Idempotent: an
 * up-to-date database is only read. A keys table created by hand with the contract's columns is
 * adopted (its rows stay, the index is added); any other table of that name is refused before
 * anything is written.
 *
 * The migrations are recorded in the library's own journal, `__idempotency_migrations` (or
 * `__idempotency_migrations_<table>`), never in drizzle's `__drizzle_migrations`, so the
 * application's migrator and this one run in either order without seeing each other's entries.
 * A file made by drizzle-idempotency 0.1.0, which recorded its migration in
 * `__drizzle_migrations`, has that record copied once into the library's journal; the
 * application's rows are left as they are.
 *
 * Safe when several processes initialise one file at once: the pending migrations are applied
 * inside one `BEGIN IMMEDIATE` transaction, and each process decides what is pending only once it
 * holds the write lock, so the losers find the work done.
 *
 * @example
 * ```ts
 * const db = drizzle({ client: new Database('app.db') });
 * applySqliteMigrations(db);
 * ```
 * @throws {@link SchemaMismatchError} when a foreign table of that name is in the way
 */
export function applySqliteMigrations(
  db: AnyBetterSqliteDatabase,
  options: SqliteMigrationOptions = {},
): void {
  applySqliteMigrationSet(db, sqliteMigrations, options);
}

/**
 * {@link applySqliteMigrations} with a chosen subset of the committed migrations (a profile such
 * as the one-shot file functions'): those left out stay pending in the journal.
 *
 * @param db - a drizzle database over better-sqlite3
 * @param migrations - the migrations to apply, a subset of the committed ones, oldest first
 * @param options - the keys table
 */
export function applySqliteMigrationSet(
  db: AnyBetterSqliteDatabase,
  migrations: readonly MigrationFile[],
  options: SqliteMigrationOptions = {},
): void {
  const client = db.$client;
  const name = sqliteTableName(options);
  const session = sessionOf(client);
  runSync(adoptableKeysTable(name), session);
  runSync(adoptableBookkeeping(name), session);
  migrateSync(
    {
      ...sqliteMigrationStatements,
      session,
      locked: (run) => client.transaction(() => run(session)).immediate(),
    },
    sqliteMigrationPlan(name, migrations),
  );
}

/**
 * Tells, without writing, whether the keys table exists and which of the library's migrations
 * the migrator would apply to it, by the migrator's own decision (its journal, the records a
 * 0.1.0 file left in drizzle's, the columns already there). A table made by the application's own
 * drizzle-kit migrations has no missing columns: only the journal is behind, and the first
 * migration run records it.
 *
 * @example
 * ```ts
 * const status = sqliteMigrationStatus(drizzle({ client: new Database('app.db') }));
 * if (status.missingColumns.length > 0) applySqliteMigrations(db);
 * ```
 * @param db - a drizzle database over better-sqlite3
 * @param options - the keys table, when not the default
 * @throws {@link SchemaMismatchError} when a foreign table of that name is in the way
 */
export function sqliteMigrationStatus(
  db: AnyBetterSqliteDatabase,
  options: SqliteMigrationOptions = {},
): MigrationStatus {
  const name = sqliteTableName(options);
  const session = sessionOf(db.$client);
  runSync(adoptableKeysTable(name), session);
  runSync(adoptableBookkeeping(name), session);
  return runSync(migrationStatus(sqliteMigrationStatements, sqliteMigrationPlan(name)), session);
}
