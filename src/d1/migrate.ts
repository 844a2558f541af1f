import {
  applySqliteMigrationsInBatch,
  type SqliteBatchDriver,
  type SqliteMigrationOptions,
} from '../sqlite-dialect/migrate.js';
import { type AnyD1Database, type D1DatabaseLike, prepare, rowsOf } from './client.js';

/** Options of {@link applyD1Migrations}: the keys table, as for the other SQLite stores. */
export type D1MigrationOptions = SqliteMigrationOptions;

// D1's reads, and its batch, which D1 applies atomically.
function driverOf(client: D1DatabaseLike): SqliteBatchDriver {
  return {
    rows: async (statement) => rowsOf<object>(await prepare(client, statement).all()),
    batch: async (statements) => {
      await client.batch(statements.map((statement) => prepare(client, statement)));
    },
  };
}

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
export function applyD1Migrations(
  db: AnyD1Database,
  options: D1MigrationOptions = {},
): Promise<void> {
  return applySqliteMigrationsInBatch(driverOf(db.$client), options);
}
