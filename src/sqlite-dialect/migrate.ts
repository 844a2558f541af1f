import { getTableConfig } from 'drizzle-orm/sqlite-core';
import { keysTableProblems } from '../core/adoption.js';
import { SchemaMismatchError } from '../core/errors.js';
import {
  type BatchMigrationDialect,
  type MigrationSession,
  type MigrationStatus,
  type MigrationSteps,
  migrateInBatch,
  read,
  readMigrationStatus,
  runAsync,
} from '../core/migrator.js';
import { DEFAULT_TABLE_NAME, migrationsTableName, retentionIndexName } from '../core/table-name.js';
import type { SqliteStatement } from './compile.js';
import {
  sqliteMigrationPlan,
  sqliteMigrationStatements,
  sqliteUnrecordedGuard,
} from './migration-dialect.js';
import type { SqliteKeysTable } from './schema.js';

/** Options of every SQLite runtime's migrator and adoption checks: the keys table. */
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
  // Added by the steps migration.
  steps: 'TEXT',
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
interface SqliteColumnInfo {
  readonly name: string;
  readonly type: string;
  readonly pk: number;
}

/**
 * Lists what keeps an existing keys table, described by its `PRAGMA table_info` rows, from being
 * adopted as a store; empty when it fits. Driver-free, so every SQLite driver judges a table alike.
 */
function sqliteKeysTableProblems(columns: readonly SqliteColumnInfo[]): string[] {
  // Compared by affinity: a hand-made table may say VARCHAR or DOUBLE where drizzle says TEXT,
  // REAL.
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

/** The steps that read the columns of `table` (none when it is absent). */
function* columnsOf(table: string): MigrationSteps<SqliteStatement, SqliteColumnInfo[]> {
  return (yield* read(sqliteMigrationStatements.columns(table))) as SqliteColumnInfo[];
}

/**
 * The checks of an existing keys table named `name`, written once as steps: better-sqlite3 runs
 * them synchronously, the asynchronous drivers (libSQL, D1, bun:sqlite) through their sessions.
 *
 * @throws {@link SchemaMismatchError} naming what keeps the table from being adopted
 */
export function* adoptableKeysTable(name: string): MigrationSteps<SqliteStatement, void> {
  // table_info also describes views, whose columns have no primary key: name the real problem.
  const [kind] = (yield* read({
    sql: 'SELECT type FROM sqlite_master WHERE name = ?',
    args: [name],
  })) as { type: string }[];
  if (kind !== undefined && kind.type !== 'table') {
    throw new SchemaMismatchError(
      `${name} is a ${kind.type}, not a table: it cannot be used as an idempotency store`,
    );
  }
  const columns = yield* columnsOf(name);
  const problems = columns.length === 0 ? [] : sqliteKeysTableProblems(columns);
  if (problems.length > 0) {
    throw new SchemaMismatchError(
      `the existing ${name} table cannot be used as an idempotency store: ${problems.join('; ')}`,
    );
  }
}

/**
 * The checks, as steps, that the journal and the retention index's name of the keys table `name`
 * are free or already ours.
 *
 * @throws {@link SchemaMismatchError} naming what is in the way
 */
export function* adoptableBookkeeping(name: string): MigrationSteps<SqliteStatement, void> {
  const journal = migrationsTableName(name);
  const columns = (yield* columnsOf(journal)).map((column) => column.name);
  if (columns.length > 0 && !(columns.includes('hash') && columns.includes('created_at'))) {
    throw new SchemaMismatchError(
      `the existing ${journal} table is not a migrations journal: it has no hash and created_at columns`,
    );
  }
  const indexName = retentionIndexName(name);
  const [index] = (yield* read({
    sql: "SELECT tbl_name FROM sqlite_master WHERE type = 'index' AND name = ?",
    args: [indexName],
  })) as { tbl_name: string }[];
  if (index !== undefined && index.tbl_name !== name) {
    throw new SchemaMismatchError(
      `the index name ${indexName} is already used by the table ${index.tbl_name}`,
    );
  }
}

/**
 * Checks, without writing, that the keys table, the library's journal and the retention index's
 * name are free or already ours: the checks of {@link assertAdoptableSqliteKeysTable} and
 * {@link assertAdoptableBookkeeping}, with the same verdicts, through any asynchronous SQLite
 * driver (libSQL, D1, bun:sqlite).
 *
 * @param session - runs reads on the database
 * @param options - the keys table, when not the default
 * @throws {@link SchemaMismatchError} naming what is in the way
 */
export async function assertAdoptableSqliteTables(
  session: Pick<MigrationSession<SqliteStatement, false>, 'rows'>,
  options: SqliteMigrationOptions = {},
): Promise<void> {
  const name = sqliteTableName(options);
  const reads = { ...session, exec: async () => undefined };
  await runAsync(adoptableKeysTable(name), reads);
  await runAsync(adoptableBookkeeping(name), reads);
}

/** What a batch-only SQLite driver supplies to be migrated: its reads and its atomic batch. */
export type SqliteBatchDriver = Pick<BatchMigrationDialect<SqliteStatement>, 'rows' | 'batch'>;

/**
 * Migrates through a SQLite driver without an interactive transaction (D1), or whose
 * transactions cannot span an await (bun:sqlite): the adoption checks, then the pending
 * migrations as one batch, each guarded so that the loser of a race rolls back whole and finds
 * the work done.
 *
 * @param driver - the driver's reads and batch
 * @param options - the keys table, when not the default
 * @throws {@link SchemaMismatchError} when a foreign table of that name is in the way
 */
export async function applySqliteMigrationsInBatch(
  driver: SqliteBatchDriver,
  options: SqliteMigrationOptions = {},
): Promise<void> {
  await assertAdoptableSqliteTables(driver, options);
  await migrateInBatch(
    { ...sqliteMigrationStatements, ...driver, unrecordedGuard: sqliteUnrecordedGuard },
    sqliteMigrationPlan(sqliteTableName(options)),
  );
}

/**
 * `sqliteMigrationStatus` through an asynchronous SQLite driver (libSQL, D1, bun:sqlite).
 *
 * @param session - runs reads on the database
 * @param options - the keys table, when not the default
 * @throws {@link SchemaMismatchError} when a foreign table of that name is in the way
 */
export async function sqliteMigrationStatusAsync(
  session: Pick<MigrationSession<SqliteStatement, false>, 'rows'>,
  options: SqliteMigrationOptions = {},
): Promise<MigrationStatus> {
  await assertAdoptableSqliteTables(session, options);
  const name = sqliteTableName(options);
  return readMigrationStatus(sqliteMigrationStatements, sqliteMigrationPlan(name), session);
}
