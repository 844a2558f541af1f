import type BetterSqlite3 from 'better-sqlite3';
import { getTableConfig } from 'drizzle-orm/sqlite-core';
import { keysTableProblems } from '../core/adoption.js';
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
import type { SqliteKeysTable } from './schema.js';
import type { AnyBetterSqliteDatabase } from './store.js';

/** Options of {@link applySqliteMigrations} and the adoption checks. */
export interface SqliteMigrationOptions {
  /** The keys table, from `sqliteKeysTable(name)`. Default: the `keys` table. */
  readonly table?: SqliteKeysTable;
}

const EXPECTED_COLUMNS: Record<string, string> = {
  id: 'TEXT',
  fingerprint: 'TEXT',
  status: 'TEXT',
  response: 'TEXT',
  expires: 'REAL',
};

// Added by the lease migration: a table from before it lacks them until it runs.
const LEASE_COLUMNS: Record<string, string> = {
  lease_until: 'REAL',
  attempt: 'INTEGER',
  unrecorded: 'INTEGER',
};

/** The name of the table the options point at. */
export function sqliteTableName(options: SqliteMigrationOptions): string {
  return options.table === undefined ? DEFAULT_TABLE_NAME : getTableConfig(options.table).name;
}

// SQLite's column affinity rules (https://sqlite.org/datatype3.html §3.1).
function affinity(declaredType: string): string {
  const type = declaredType.toUpperCase();
  if (type.includes('INT')) return 'INTEGER';
  if (type.includes('CHAR') || type.includes('CLOB') || type.includes('TEXT')) return 'TEXT';
  if (type.includes('REAL') || type.includes('FLOA') || type.includes('DOUB')) return 'REAL';
  return type === '' ? 'BLOB' : 'NUMERIC';
}

/** A row of SQLite's `PRAGMA table_info`, as every SQLite driver returns it. */
export interface SqliteColumnInfo {
  readonly name: string;
  readonly type: string;
  readonly pk: number;
}

/**
 * Lists what keeps an existing keys table, described by its `PRAGMA table_info` rows, from being
 * adopted as a store; empty when it fits. Driver-free, so every SQLite driver judges a table alike.
 */
export function sqliteKeysTableProblems(columns: readonly SqliteColumnInfo[]): string[] {
  // Compared by affinity: a hand-made table may say VARCHAR or DOUBLE where drizzle says TEXT, REAL.
  return keysTableProblems(
    columns.map((column) => ({
      name: column.name,
      type: affinity(column.type),
      primary: column.pk > 0,
    })),
    EXPECTED_COLUMNS,
    LEASE_COLUMNS,
  );
}

function columnsOf(client: BetterSqlite3.Database, table: string): SqliteColumnInfo[] {
  return client.prepare(`PRAGMA table_info("${table}")`).all() as SqliteColumnInfo[];
}

function tableExists(client: BetterSqlite3.Database, table: string): boolean {
  return (
    client.prepare("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?").get(table) !==
    undefined
  );
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
  const name = sqliteTableName(options);
  // table_info also describes views, whose columns have no primary key: name the real problem.
  const kind = client.prepare('SELECT type FROM sqlite_master WHERE name = ?').get(name) as
    | { type: string }
    | undefined;
  if (kind !== undefined && kind.type !== 'table') {
    throw new SchemaMismatchError(
      `${name} is a ${kind.type}, not a table: it cannot be used as an idempotency store`,
    );
  }
  const columns = columnsOf(client, name);
  if (columns.length === 0) return;
  const problems = sqliteKeysTableProblems(columns);
  if (problems.length > 0) {
    throw new SchemaMismatchError(
      `the existing ${name} table cannot be used as an idempotency store: ${problems.join('; ')}`,
    );
  }
}

/**
 * The former name of {@link assertAdoptableSqliteKeysTable}, the same check.
 *
 * @deprecated Use `assertAdoptableSqliteKeysTable`: every dialect's check is named
 * `assertAdoptable<Dialect>KeysTable`. This name is removed in 1.0.
 */
export const assertAdoptableKeysTable = assertAdoptableSqliteKeysTable;

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
  const name = sqliteTableName(options);
  const journal = migrationsTableName(name);
  const columns = columnsOf(client, journal).map((column) => column.name);
  if (columns.length > 0 && !(columns.includes('hash') && columns.includes('created_at'))) {
    throw new SchemaMismatchError(
      `the existing ${journal} table is not a migrations journal: it has no hash and created_at columns`,
    );
  }
  const indexName = retentionIndexName(name);
  const index = client
    .prepare("SELECT tbl_name FROM sqlite_master WHERE type = 'index' AND name = ?")
    .get(indexName) as { tbl_name: string } | undefined;
  if (index !== undefined && index.tbl_name !== name) {
    throw new SchemaMismatchError(
      `the index name ${indexName} is already used by the table ${index.tbl_name}`,
    );
  }
}

// The rows of drizzle's journal, when it is one: anything else there is the application's.
function legacyRows(client: BetterSqlite3.Database): JournalRow[] {
  const columns = columnsOf(client, LEGACY_MIGRATIONS_TABLE).map((column) => column.name);
  if (!(columns.includes('hash') && columns.includes('created_at'))) return [];
  return client
    .prepare(`SELECT hash, created_at FROM "${LEGACY_MIGRATIONS_TABLE}"`)
    .all() as JournalRow[];
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
 * const db = drizzle(new Database('app.db'));
 * applySqliteMigrations(db);
 * ```
 * @throws {@link SchemaMismatchError} when a foreign table of that name is in the way
 */
export function applySqliteMigrations(
  db: AnyBetterSqliteDatabase,
  options: SqliteMigrationOptions = {},
): void {
  const client = db.$client;
  const name = sqliteTableName(options);
  assertAdoptableSqliteKeysTable(client, options);
  assertAdoptableBookkeeping(client, options);
  const journal = migrationsTableName(name);
  const migrations = sqliteMigrations;
  const applied = (): JournalRow[] =>
    tableExists(client, journal)
      ? (client.prepare(`SELECT hash, created_at FROM "${journal}"`).all() as JournalRow[])
      : [];
  if (pendingMigrations(migrations, applied()).length === 0) return;
  client
    .transaction(() => {
      const record = () =>
        client.prepare(`INSERT INTO "${journal}" ("hash", "created_at") VALUES (?, ?)`);
      if (!tableExists(client, journal)) {
        client.exec(
          `CREATE TABLE "${journal}" (id INTEGER PRIMARY KEY, hash text NOT NULL, created_at numeric)`,
        );
        // 0.1.0 only ever made the default table, so only its journal has records to carry over.
        if (name === DEFAULT_TABLE_NAME) {
          for (const migration of legacyJournalRows(migrations, legacyRows(client))) {
            record().run(migration.hash, migration.folderMillis);
          }
        }
      }
      for (const migration of pendingMigrations(migrations, applied())) {
        for (const statement of migration.sql) {
          const renamed = renameMigrationStatement(statement, name, '`');
          const added = addedColumn(renamed, '`');
          const present =
            added !== undefined &&
            columnsOf(client, added.table).some((column) => column.name === added.column);
          if (!present) client.exec(renamed);
        }
        record().run(migration.hash, migration.folderMillis);
      }
    })
    .immediate();
}
