import { migrateInBatch } from '../core/migrator.js';
import {
  assertAdoptableSqliteTables,
  type SqliteMigrationOptions,
  sqliteTableName,
} from '../sqlite/migrate.js';
import {
  sqliteMigrationPlan,
  sqliteMigrationStatements,
  sqliteUnrecordedGuard,
} from '../sqlite/migration-dialect.js';
import { type AnyD1Database, prepare, rowsOf } from './client.js';

/** Options of {@link applyD1Migrations}: the keys table, as for the other SQLite stores. */
export type D1MigrationOptions = SqliteMigrationOptions;

/**
 * Applies the committed SQLite migrations (the same SQL, journal and table naming as the other
 * SQLite stores, shipped inside the package) to a D1 database, for the keys table `options.table`
 * (default `keys`). Idempotent: an up-to-date database is only read, so a Worker may call it on
 * every cold start. A keys table created by hand with the contract's columns is adopted; any
 * other table of that name is refused before anything is written. The migrations are recorded in
 * the library's own journal (`__idempotency_migrations`, or `__idempotency_migrations_<table>`).
 *
 * D1 has no interactive transaction, so the pending migrations run as one `batch`, which D1
 * applies atomically. Each migration in it is guarded by a statement that fails when the
 * migration is already recorded, so when several isolates migrate at once, the losers' batches
 * roll back whole and they find the work done.
 *
 * @example
 * ```ts
 * import { drizzle } from 'drizzle-orm/d1';
 * import { applyD1Migrations } from 'drizzle-idempotency/d1';
 *
 * export async function migrate(env: { DB: D1Database }) {
 *   await applyD1Migrations(drizzle(env.DB));
 * }
 * ```
 * @throws {@link SchemaMismatchError} when a foreign table of that name is in the way
 */
export async function applyD1Migrations(
  db: AnyD1Database,
  options: D1MigrationOptions = {},
): Promise<void> {
  const client = db.$client;
  const rows = async (statement: Parameters<typeof prepare>[1]) =>
    rowsOf<object>(await prepare(client, statement).all());
  await assertAdoptableSqliteTables({ rows }, options);
  await migrateInBatch(
    {
      ...sqliteMigrationStatements,
      unrecordedGuard: sqliteUnrecordedGuard,
      rows,
      batch: async (statements) => {
        await client.batch(statements.map((statement) => prepare(client, statement)));
      },
    },
    sqliteMigrationPlan(sqliteTableName(options)),
  );
}
