import type { Client, InValue, Transaction } from '@libsql/client';
import { type MigrationSession, type MigrationStatus, migrateAsync } from '../core/migrator.js';
import type { SqliteStatement } from '../sqlite-dialect/compile.js';
import {
  assertAdoptableSqliteTables,
  type SqliteMigrationOptions,
  sqliteMigrationStatusAsync,
  sqliteTableName,
} from '../sqlite-dialect/migrate.js';
import {
  sqliteMigrationPlan,
  sqliteMigrationStatements,
} from '../sqlite-dialect/migration-dialect.js';
import type { AnyLibsqlDatabase } from './store.js';

/** Options of {@link applyLibsqlMigrations}: the keys table, as for the better-sqlite3 store. */
export type LibsqlMigrationOptions = SqliteMigrationOptions;

// A libSQL client or one of its transactions as the migrator's session.
function sessionOf(
  run: Pick<Client | Transaction, 'execute'>,
): MigrationSession<SqliteStatement, false> {
  const execute = (statement: SqliteStatement) =>
    run.execute({ sql: statement.sql, args: statement.args as InValue[] });
  return {
    rows: async (statement) => (await execute(statement)).rows.map((row) => ({ ...row })),
    exec: async (statement) => {
      await execute(statement);
    },
  };
}

/**
 * Checks, without writing, that the keys table, the library's journal and the retention index's
 * name are free or already ours, on a libSQL database: the same checks, with the same verdicts,
 * as the better-sqlite3 store's `assertAdoptableSqliteKeysTable`.
 *
 * @throws {@link SchemaMismatchError} naming what is in the way
 */
export function assertAdoptableLibsqlKeysTable(
  db: AnyLibsqlDatabase,
  options: LibsqlMigrationOptions = {},
): Promise<void> {
  return assertAdoptableSqliteTables(sessionOf(db.$client), options);
}

/**
 * Applies the committed SQLite migrations (the same files, journal and table naming as
 * `applySqliteMigrations`) through a libSQL client, for the keys table `options.table` (default
 * `keys`). Idempotent: an up-to-date database is only read. A keys table created by hand with the
 * contract's columns is adopted; any other table of that name is refused before anything is
 * written. The migrations are recorded in the library's own journal (`__idempotency_migrations`,
 * or `__idempotency_migrations_<table>`), never in drizzle's `__drizzle_migrations`; a file made
 * by drizzle-idempotency 0.1.0 has its record there copied over once.
 *
 * Safe when several processes initialise one file at once: the pending migrations are applied in
 * one `write` transaction (`BEGIN IMMEDIATE`), and what is pending is decided only once the write
 * lock is held, so the losers find the work done. That transaction stays open across awaits: run
 * this before the client serves other operations.
 *
 * @example
 * ```ts
 * import { createClient } from '@libsql/client';
 * import { drizzle } from 'drizzle-orm/libsql';
 * import { applyLibsqlMigrations } from 'drizzle-idempotency/libsql';
 *
 * await applyLibsqlMigrations(drizzle({ client: createClient({ url: 'file:app.db' }) }));
 * ```
 * @throws {@link SchemaMismatchError} when a foreign table of that name is in the way
 */
export async function applyLibsqlMigrations(
  db: AnyLibsqlDatabase,
  options: LibsqlMigrationOptions = {},
): Promise<void> {
  const client = db.$client;
  await assertAdoptableLibsqlKeysTable(db, options);
  await migrateAsync(
    {
      ...sqliteMigrationStatements,
      session: sessionOf(client),
      locked: async (run) => {
        const tx = await client.transaction('write');
        try {
          await run(sessionOf(tx));
          await tx.commit();
        } finally {
          tx.close();
        }
      },
    },
    sqliteMigrationPlan(sqliteTableName(options)),
  );
}

/**
 * Tells, without writing, whether the keys table exists and which of the library's migrations
 * {@link applyLibsqlMigrations} would apply, by the migrator's own decision; see the
 * better-sqlite3 store's `sqliteMigrationStatus`.
 *
 * @example
 * ```ts
 * import { createClient } from '@libsql/client';
 * import { drizzle } from 'drizzle-orm/libsql';
 * import { libsqlMigrationStatus } from 'drizzle-idempotency/libsql';
 *
 * const { pending } = await libsqlMigrationStatus(drizzle({ client: createClient({ url: 'file:app.db' }) }));
 * ```
 * @param db - a drizzle database over a libSQL client
 * @param options - the keys table, when not the default
 * @throws {@link SchemaMismatchError} when a foreign table of that name is in the way
 */
export function libsqlMigrationStatus(
  db: AnyLibsqlDatabase,
  options: LibsqlMigrationOptions = {},
): Promise<MigrationStatus> {
  return sqliteMigrationStatusAsync(sessionOf(db.$client), options);
}
