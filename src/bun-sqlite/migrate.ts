import { migrateInBatch } from '../core/migrator.js';
import {
  assertAdoptableSqliteTables,
  type SqliteMigrationOptions,
  sqliteTableName,
} from '../sqlite/migrate.js';
import {
  type SqliteStatement,
  sqliteMigrationPlan,
  sqliteMigrationStatements,
  sqliteUnrecordedGuard,
} from '../sqlite/migration-dialect.js';
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
 * await applyBunSqliteMigrations(drizzle(new Database('app.db')));
 * ```
 * @throws {@link SchemaMismatchError} when a foreign table of that name is in the way
 */
export async function applyBunSqliteMigrations(
  db: AnyBunSqliteDatabase,
  options: BunSqliteMigrationOptions = {},
): Promise<void> {
  const client = db.$client;
  const rows = async (statement: SqliteStatement) =>
    client.prepare(statement.sql).all(...statement.args) as object[];
  await assertAdoptableSqliteTables({ rows }, options);
  await migrateInBatch(
    {
      ...sqliteMigrationStatements,
      unrecordedGuard: sqliteUnrecordedGuard,
      rows,
      batch: async (statements) => {
        client
          .transaction(() => {
            for (const statement of statements) {
              client.prepare(statement.sql).run(...statement.args);
            }
          })
          .immediate();
      },
    },
    sqliteMigrationPlan(sqliteTableName(options)),
  );
}
