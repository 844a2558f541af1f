import { assertAdoptableSqliteTables, type SqliteQuery } from '../libsql/migrate.js';
import { type SqliteMigrationOptions, sqliteTableName } from '../sqlite/migrate.js';
import { sqliteMigrationBatch } from '../sqlite/migration-batch.js';
import type { AnyDurableSqliteDatabase } from './client.js';

/** Options of {@link applyDurableSqliteMigrations}: the keys table, as for the other SQLite stores. */
export type DurableSqliteMigrationOptions = SqliteMigrationOptions;

/**
 * Applies the committed SQLite migrations (the same SQL, journal and table naming as the other
 * SQLite stores, shipped inside the package) to a Durable Object's SQLite storage, for the keys
 * table `options.table` (default `keys`). Idempotent: an up-to-date database is only read, so a
 * Durable Object may call it from its constructor on every start. A keys table created by hand
 * with the contract's columns is adopted; any other table of that name is refused before anything
 * is written. The migrations are recorded in the library's own journal
 * (`__idempotency_migrations`, or `__idempotency_migrations_<table>`).
 *
 * A Durable Object refuses `BEGIN`, so the pending migrations run in one `transactionSync`, each
 * guarded by a statement that fails when it is already recorded: a second run that found the same
 * migrations pending rolls back whole and finds the work done.
 *
 * @example
 * ```ts
 * import { drizzle } from 'drizzle-orm/durable-sqlite';
 * import { applyDurableSqliteMigrations } from 'drizzle-idempotency/durable-sqlite';
 *
 * // In the Durable Object's constructor: no request is delivered before the table exists.
 * ctx.blockConcurrencyWhile(() => applyDurableSqliteMigrations(drizzle(ctx.storage)));
 * ```
 * @throws {@link SchemaMismatchError} when a foreign table of that name is in the way
 */
export async function applyDurableSqliteMigrations(
  db: AnyDurableSqliteDatabase,
  options: DurableSqliteMigrationOptions = {},
): Promise<void> {
  const storage = db.$client;
  const query: SqliteQuery = async <Row>(sql: string, args: readonly unknown[] = []) =>
    storage.sql.exec(sql, ...args).toArray() as Row[];
  const name = sqliteTableName(options);
  await assertAdoptableSqliteTables(query, options);
  const batch = await sqliteMigrationBatch(query, name);
  if (batch === undefined) return;
  try {
    storage.transactionSync(() => {
      for (const statement of batch) storage.sql.exec(statement.sql, ...statement.args).toArray();
    });
  } catch (error) {
    // An earlier run may have applied the same migrations first: then there is nothing left.
    if ((await sqliteMigrationBatch(query, name)) === undefined) return;
    throw error;
  }
}
