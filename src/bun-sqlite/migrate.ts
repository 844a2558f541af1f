import { assertAdoptableSqliteTables, type SqliteQuery } from '../libsql/migrate.js';
import { type SqliteMigrationOptions, sqliteTableName } from '../sqlite/migrate.js';
import { sqliteMigrationBatch } from '../sqlite/migration-batch.js';
import type { AnyBunSqliteDatabase } from './client.js';

/** Options of {@link applyBunSqliteMigrations}: the keys table, as for the other SQLite stores. */
export type BunSqliteMigrationOptions = SqliteMigrationOptions;

/**
 * Applies the committed SQLite migrations (the same SQL, journal and table naming as the other
 * SQLite stores, shipped inside the package) to a bun:sqlite database, for the keys table
 * `options.table` (default `keys`). Idempotent: an up-to-date database is only read. A keys table
 * created by hand with the contract's columns is adopted; any other table of that name is refused
 * before anything is written. The migrations are recorded in the library's own journal
 * (`__idempotency_migrations`, or `__idempotency_migrations_<table>`).
 *
 * The pending migrations run in one `BEGIN IMMEDIATE` transaction, each guarded by a statement
 * that fails when it is already recorded, so when several processes initialise one file at once
 * the losers roll back and find the work done.
 *
 * @example
 * ```ts
 * import { Database } from 'bun:sqlite';
 * import { drizzle } from 'drizzle-orm/bun-sqlite';
 * import { applyBunSqliteMigrations } from 'drizzle-idempotency/bun-sqlite';
 *
 * await applyBunSqliteMigrations(drizzle(new Database('app.db')));
 * ```
 * @throws {@link SchemaMismatchError} when a foreign table of that name is in the way
 */
export async function applyBunSqliteMigrations(
  db: AnyBunSqliteDatabase,
  options: BunSqliteMigrationOptions = {},
): Promise<void> {
  const client = db.$client;
  const query: SqliteQuery = async <Row>(sql: string, args: readonly unknown[] = []) =>
    client.prepare(sql).all(...args) as Row[];
  const name = sqliteTableName(options);
  await assertAdoptableSqliteTables(query, options);
  const batch = await sqliteMigrationBatch(query, name);
  if (batch === undefined) return;
  const apply = client.transaction(() => {
    for (const statement of batch) client.prepare(statement.sql).run(...statement.args);
  });
  try {
    apply.immediate();
  } catch (error) {
    // Another process may have applied the same migrations first: then there is nothing left.
    if ((await sqliteMigrationBatch(query, name)) === undefined) return;
    throw error;
  }
}
