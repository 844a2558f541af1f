import type { SqliteStatement } from '../sqlite-dialect/compile.js';
import {
  applySqliteMigrationsInBatch,
  type SqliteBatchDriver,
  type SqliteMigrationOptions,
} from '../sqlite-dialect/migrate.js';
import type { AnyBunSqliteDatabase } from './client.js';

/** Options of {@link applyBunSqliteMigrations}: the keys table, as for the other SQLite stores. */
export type BunSqliteMigrationOptions = SqliteMigrationOptions;

// bun:sqlite's reads, and its batch: one immediate transaction, which cannot span an await.
function driverOf(client: AnyBunSqliteDatabase['$client']): SqliteBatchDriver {
  const run = client.transaction((statements: readonly SqliteStatement[]) => {
    for (const statement of statements) client.prepare(statement.sql).run(...statement.args);
  });
  return {
    rows: async (statement) => client.prepare(statement.sql).all(...statement.args) as object[],
    batch: async (statements) => run.immediate(statements),
  };
}

/**
 * Applies the committed SQLite migrations (the same SQL, journal and table naming as the other
 * SQLite stores, shipped inside the package) to a bun:sqlite database, for the keys table
 * `options.table` (default `keys`). Idempotent: an up-to-date database is only read. A keys table
 * created by hand with the contract's columns is adopted; any other table of that name is refused
 * before anything is written. The migrations are recorded in the library's own journal
 * (`__idempotency_migrations`, or `__idempotency_migrations_<table>`).
 *
 * bun:sqlite's transactions cannot span an await, so the pending migrations run as one batch in a
 * `BEGIN IMMEDIATE` transaction, each guarded by a statement that fails when it is already
 * recorded: when several processes initialise one file at once the losers roll back and find the
 * work done.
 *
 * @example
 * ```ts
 * import { Database } from 'bun:sqlite';
 * import { drizzle } from 'drizzle-orm/bun-sqlite';
 * import { applyBunSqliteMigrations } from 'drizzle-idempotency/bun-sqlite';
 *
 * await applyBunSqliteMigrations(drizzle({ client: new Database('app.db') }));
 * ```
 * @throws {@link SchemaMismatchError} when a foreign table of that name is in the way
 */
export function applyBunSqliteMigrations(
  db: AnyBunSqliteDatabase,
  options: BunSqliteMigrationOptions = {},
): Promise<void> {
  return applySqliteMigrationsInBatch(driverOf(db.$client), options);
}
