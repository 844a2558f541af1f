import type { Client, InValue, Transaction } from '@libsql/client';
import { SchemaMismatchError } from '../core/errors.js';
import {
  addedColumn,
  type JournalRow,
  legacyJournalRows,
  pendingMigrations,
} from '../core/journal.js';
import {
  DEFAULT_TABLE_NAME,
  LEGACY_MIGRATIONS_TABLE,
  migrationsTableName,
  renameMigrationStatement,
  retentionIndexName,
} from '../core/table-name.js';
import { sqliteMigrations } from '../generated/migrations.js';
import {
  type SqliteColumnInfo,
  type SqliteMigrationOptions,
  sqliteKeysTableProblems,
  sqliteTableName,
} from '../sqlite/migrate.js';
import type { AnyLibsqlDatabase } from './store.js';

/** Options of {@link applyLibsqlMigrations}: the keys table, as for the better-sqlite3 store. */
export type LibsqlMigrationOptions = SqliteMigrationOptions;

type Runner = Pick<Client | Transaction, 'execute'>;

async function rowsOf<Row>(run: Runner, sql: string, args: InValue[] = []): Promise<Row[]> {
  const result = await run.execute({ sql, args });
  return result.rows.map((row) => ({ ...row }) as Row);
}

function columnsOf(run: Runner, table: string): Promise<SqliteColumnInfo[]> {
  return rowsOf<SqliteColumnInfo>(run, `PRAGMA table_info("${table}")`);
}

async function journalRows(run: Runner, table: string): Promise<JournalRow[]> {
  const names = (await columnsOf(run, table)).map((column) => column.name);
  if (!(names.includes('hash') && names.includes('created_at'))) return [];
  return rowsOf<JournalRow>(run, `SELECT hash, created_at FROM "${table}"`);
}

/** One read on an asynchronous SQLite database: its rows as plain objects. */
export type SqliteQuery = <Row>(sql: string, args?: readonly unknown[]) => Promise<Row[]>;

/**
 * Checks, without writing, that the keys table, the library's journal and the retention index's
 * name are free or already ours: the same checks, with the same verdicts, as the better-sqlite3
 * store's `assertAdoptableSqliteKeysTable` and `assertAdoptableBookkeeping`, through any asynchronous
 * SQLite driver (libSQL, D1).
 *
 * @param query - runs one read on the database and answers its rows as plain objects
 * @param options - the keys table, when not the default
 * @throws {@link SchemaMismatchError} naming what is in the way
 */
export async function assertAdoptableSqliteTables(
  query: SqliteQuery,
  options: SqliteMigrationOptions = {},
): Promise<void> {
  const name = sqliteTableName(options);
  // table_info also describes views, whose columns have no primary key: name the real problem.
  const [kind] = await query<{ type: string }>('SELECT type FROM sqlite_master WHERE name = ?', [
    name,
  ]);
  if (kind !== undefined && kind.type !== 'table') {
    throw new SchemaMismatchError(
      `${name} is a ${kind.type}, not a table: it cannot be used as an idempotency store`,
    );
  }
  const columns = await query<SqliteColumnInfo>(`PRAGMA table_info("${name}")`);
  const problems = columns.length === 0 ? [] : sqliteKeysTableProblems(columns);
  if (problems.length > 0) {
    throw new SchemaMismatchError(
      `the existing ${name} table cannot be used as an idempotency store: ${problems.join('; ')}`,
    );
  }
  const journal = migrationsTableName(name);
  const journalColumns = (await query<SqliteColumnInfo>(`PRAGMA table_info("${journal}")`)).map(
    (column) => column.name,
  );
  if (
    journalColumns.length > 0 &&
    !(journalColumns.includes('hash') && journalColumns.includes('created_at'))
  ) {
    throw new SchemaMismatchError(
      `the existing ${journal} table is not a migrations journal: it has no hash and created_at columns`,
    );
  }
  const indexName = retentionIndexName(name);
  const [index] = await query<{ tbl_name: string }>(
    "SELECT tbl_name FROM sqlite_master WHERE type = 'index' AND name = ?",
    [indexName],
  );
  if (index !== undefined && index.tbl_name !== name) {
    throw new SchemaMismatchError(
      `the index name ${indexName} is already used by the table ${index.tbl_name}`,
    );
  }
}

/**
 * Checks, without writing, that the keys table, the library's journal and the retention index's
 * name are free or already ours, on a libSQL database: see {@link assertAdoptableSqliteTables}.
 *
 * @throws {@link SchemaMismatchError} naming what is in the way
 */
export function assertAdoptableLibsqlKeysTable(
  db: AnyLibsqlDatabase,
  options: LibsqlMigrationOptions = {},
): Promise<void> {
  const client = db.$client;
  return assertAdoptableSqliteTables(
    (sql, args = []) => rowsOf(client, sql, args as InValue[]),
    options,
  );
}

/**
 * The former name of {@link assertAdoptableLibsqlKeysTable}, the same check.
 *
 * @deprecated Use `assertAdoptableLibsqlKeysTable`: every dialect's check is named
 * `assertAdoptable<Dialect>KeysTable`. This name is removed in 1.0.
 */
export const assertAdoptableLibsqlTables = assertAdoptableLibsqlKeysTable;

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
 * await applyLibsqlMigrations(drizzle(createClient({ url: 'file:app.db' })));
 * ```
 * @throws {@link SchemaMismatchError} when a foreign table of that name is in the way
 */
export async function applyLibsqlMigrations(
  db: AnyLibsqlDatabase,
  options: LibsqlMigrationOptions = {},
): Promise<void> {
  const client = db.$client;
  const name = sqliteTableName(options);
  await assertAdoptableLibsqlKeysTable(db, options);
  const journal = migrationsTableName(name);
  const migrations = sqliteMigrations;
  if (pendingMigrations(migrations, await journalRows(client, journal)).length === 0) return;
  const tx = await client.transaction('write');
  try {
    const record = (hash: string, when: number) =>
      tx.execute({
        sql: `INSERT INTO "${journal}" ("hash", "created_at") VALUES (?, ?)`,
        args: [hash, when],
      });
    if ((await columnsOf(tx, journal)).length === 0) {
      await tx.execute(
        `CREATE TABLE "${journal}" (id INTEGER PRIMARY KEY, hash text NOT NULL, created_at numeric)`,
      );
      // 0.1.0 only ever made the default table, so only its journal has records to carry over.
      if (name === DEFAULT_TABLE_NAME) {
        const legacy = await journalRows(tx, LEGACY_MIGRATIONS_TABLE);
        for (const migration of legacyJournalRows(migrations, legacy)) {
          await record(migration.hash, migration.folderMillis);
        }
      }
    }
    for (const migration of pendingMigrations(migrations, await journalRows(tx, journal))) {
      for (const statement of migration.sql) {
        const renamed = renameMigrationStatement(statement, name, '`');
        // A table made by the app's own drizzle-kit migrations already has the later columns.
        const added = addedColumn(renamed, '`');
        const present =
          added !== undefined &&
          (await columnsOf(tx, added.table)).some((column) => column.name === added.column);
        if (!present) await tx.execute(renamed);
      }
      await record(migration.hash, migration.folderMillis);
    }
    await tx.commit();
  } finally {
    tx.close();
  }
}
