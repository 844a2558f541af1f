import {
  applySqliteMigrationsInBatch,
  type SqliteBatchDriver,
  type SqliteMigrationOptions,
} from '../sqlite-dialect/migrate.js';
import type { AnyDurableSqliteDatabase, DurableSqliteStorageLike } from './client.js';

/** Options of {@link applyDurableSqliteMigrations}: the keys table, as for the other SQLite stores. */
export type DurableSqliteMigrationOptions = SqliteMigrationOptions;

// The storage's reads, and its batch: one `transactionSync`, since a Durable Object refuses
// `BEGIN`.
function driverOf(storage: DurableSqliteStorageLike): SqliteBatchDriver {
  return {
    rows: async (statement) =>
      storage.sql.exec(statement.sql, ...statement.args).toArray() as object[],
    batch: async (statements) =>
      storage.transactionSync(() => {
        for (const statement of statements) {
          storage.sql.exec(statement.sql, ...statement.args).toArray();
        }
      }),
  };
}

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
export function applyDurableSqliteMigrations(
  db: AnyDurableSqliteDatabase,
  options: DurableSqliteMigrationOptions = {},
): Promise<void> {
  return applySqliteMigrationsInBatch(driverOf(db.$client), options);
}
