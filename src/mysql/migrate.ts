import { type SQL, sql } from 'drizzle-orm';
import { type ColumnType, keysTableProblems } from '../core/adoption.js';
import { SchemaMismatchError } from '../core/errors.js';
import {
  type MigrationSession,
  type MigrationStatements,
  type MigrationStatus,
  migrateAsync,
  readMigrationStatus,
} from '../core/migrator.js';
import { mysqlMigrations } from '../generated/migrations.js';
import { type AnyMysqlDatabase, queryRows } from './client.js';
import { withClusterLock } from './cluster-lock.js';
import { mysqlErrno, retryDeadlocks } from './errors.js';
import { MYSQL_MAX_TEXT_BYTES, type MysqlTableOptions, resolveMysqlTable } from './schema.js';

/** Options of {@link applyMysqlMigrations} and {@link assertAdoptableMysqlKeysTable}. */
export type MysqlMigrationOptions = MysqlTableOptions;

const EXPECTED_COLUMNS: Record<string, ColumnType> = {
  id: `varbinary(${MYSQL_MAX_TEXT_BYTES})`,
  fingerprint: `varbinary(${MYSQL_MAX_TEXT_BYTES})`,
  status: 'varchar(7)',
  response: 'longtext',
  expires: 'double',
  lease_until: 'double',
  // The fencing token is bigint since the migration 0001_fencing_token_bigint; before it, int.
  attempt: ['bigint', 'int'],
  unrecorded: 'boolean',
};

// Added by the steps migration: a table from before it lacks it until it runs.
const STEP_COLUMNS: Record<string, ColumnType> = { steps: 'longtext' };

// MariaDB and MySQL 5.7 write display widths (`int(11)`), MySQL 8 does not; `boolean` is an
// alias of `tinyint(1)` on both.
function normalType(columnType: string): string {
  const type = columnType.toLowerCase();
  if (type === 'tinyint(1)') return 'boolean';
  return type.replace(/^(tinyint|smallint|mediumint|int|bigint)\(\d+\)/, '$1');
}

interface ColumnInfo {
  name: string;
  type: string;
  charset: string | null;
  primary: number | string;
}

/**
 * Checks, without writing, that an existing keys table in the connection's database is one the
 * store can adopt: an InnoDB table (row locks and transactions make every operation atomic) with
 * exactly the store's columns and types, `id` as the sole primary key (what makes `reserve`
 * atomic), and the answer stored as utf8mb4.
 *
 * @throws {@link SchemaMismatchError} naming what differs
 */
export async function assertAdoptableMysqlKeysTable(
  db: Pick<AnyMysqlDatabase, 'execute'>,
  options: MysqlMigrationOptions = {},
): Promise<void> {
  const { name: table } = resolveMysqlTable(options);
  const [found] = await queryRows<{ engine: string | null; kind: string }>(
    db,
    sql`SELECT ENGINE AS engine, TABLE_TYPE AS kind FROM information_schema.TABLES
        WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = ${table}`,
  );
  if (found === undefined) return;
  const problems: string[] = [];
  if (found.kind !== 'BASE TABLE') problems.push(`it is a ${found.kind.toLowerCase()}`);
  else if (found.engine?.toLowerCase() !== 'innodb') {
    problems.push(`its engine is ${found.engine ?? 'unknown'}, expected InnoDB`);
  }
  const columns = await queryRows<ColumnInfo>(
    db,
    sql`SELECT COLUMN_NAME AS name, COLUMN_TYPE AS type, CHARACTER_SET_NAME AS charset,
          COLUMN_KEY = 'PRI' AS \`primary\`
        FROM information_schema.COLUMNS
        WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = ${table}
        ORDER BY ORDINAL_POSITION`,
  );
  // A table has at least one column: none means its CREATE is still being applied, on Galera by
  // another node's migration at this moment. Nothing is there to adopt yet, as with no table.
  if (columns.length === 0) return;
  problems.push(
    ...keysTableProblems(
      columns.map((column) => ({
        name: column.name,
        type: normalType(column.type),
        primary: Number(column.primary) === 1,
      })),
      EXPECTED_COLUMNS,
      STEP_COLUMNS,
    ),
  );
  const response = columns.find((column) => column.name === 'response');
  if (response?.charset != null && response.charset !== 'utf8mb4') {
    problems.push(`column response is in ${response.charset}, expected utf8mb4`);
  }
  if (problems.length > 0) {
    throw new SchemaMismatchError(
      `the existing ${table} table cannot be used as an idempotency store: ${problems.join('; ')}`,
    );
  }
}

// GET_LOCK names are at most 64 characters and shared by the whole server: hash the database and
// table into one.
function lockName(table: string): SQL {
  return sql`concat('idempotency_', sha1(concat(DATABASE(), '.', ${table})))`;
}

const LOCK_TIMEOUT_SECONDS = 120;

// Table exists (1050), duplicate column (1060), duplicate key name (1061).
const ALREADY_MADE = new Set([1050, 1060, 1061]);

// Runs one statement of a migration, taking "it already exists" as done: a run cut off between
// two statements (MySQL's DDL is not transactional) meets these errors when it is started again.
async function executeRepeatable(tx: Pick<AnyMysqlDatabase, 'execute'>, statement: SQL) {
  try {
    await tx.execute(statement);
  } catch (error) {
    const errno = mysqlErrno(error);
    if (errno === undefined || !ALREADY_MADE.has(errno)) throw error;
  }
}

/** The migrator's statements on MySQL and MariaDB, in the connection's database. */
const mysqlMigrationStatements: MigrationStatements<SQL> = {
  quote: '`',
  columns: (table) =>
    sql`SELECT COLUMN_NAME AS name FROM information_schema.COLUMNS
        WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = ${table} ORDER BY ORDINAL_POSITION`,
  journalRows: (journal) => sql`SELECT hash, created_at FROM ${sql.identifier(journal)}`,
  createJournal: (journal) =>
    sql`CREATE TABLE IF NOT EXISTS ${sql.identifier(journal)} (id serial PRIMARY KEY, hash text NOT NULL, created_at bigint)`,
  record: (journal, migration) =>
    sql`INSERT INTO ${sql.identifier(journal)} (hash, created_at) VALUES (${migration.hash}, ${migration.folderMillis})`,
  migration: (statement) => sql.raw(statement),
};

// On Galera, DDL runs in total order on every node at once and aborts any local statement that
// touches the same table, even a read of information_schema, which then fails as a deadlock
// (1213). Every statement the migrator runs is safe to run again: reads read, and the DDL takes
// "it already exists" as done. The abort undoes the statement that failed and whatever the open
// transaction holds, which after a DDL's implicit commit is nothing; before one, at most a
// journal row for a migration whose work was found done, which the next run records again.
function retryingDeadlocks(
  db: Pick<AnyMysqlDatabase, 'execute'>,
): Pick<AnyMysqlDatabase, 'execute'> {
  return {
    execute: ((statement: SQL) =>
      retryDeadlocks(() => db.execute(statement), {
        attempts: 8,
        backoffMs: 20,
      })) as AnyMysqlDatabase['execute'],
  };
}

/** A drizzle MySQL database or transaction as the migrator's session. */
function sessionOf(db: Pick<AnyMysqlDatabase, 'execute'>): MigrationSession<SQL, false> {
  const retrying = retryingDeadlocks(db);
  return {
    rows: (statement) => queryRows<object>(retrying, statement),
    exec: (statement) => executeRepeatable(retrying, statement),
  };
}

/**
 * Applies the committed drizzle-kit migrations to the connection's MySQL or MariaDB database,
 * for the keys table `options.table` (default `keys`). Idempotent: an up-to-date database is only
 * read. A table made by hand with the store's columns is adopted (its rows stay, the index is
 * added); any other table of that name is refused before anything is written. The migrations are
 * recorded in the library's own journal, `__idempotency_migrations` (or
 * `__idempotency_migrations_<table>`), never in drizzle's `__drizzle_migrations`; what is pending
 * is every committed migration the journal does not record, as on the other dialects.
 *
 * Safe when many instances start at once: MySQL's DDL cannot run inside a transaction, so the
 * instances serialise on a named lock (`GET_LOCK`, keyed by the database and the table) held by
 * one connection for the whole run, and each decides what is pending only once it holds it. On a
 * Galera node, where `GET_LOCK` is node-local, they first take a lock the whole cluster sees: a
 * row of `__idempotency_locks` (see `withClusterLock`), so each migration is recorded once.
 *
 * @example
 * ```ts
 * import { drizzle } from 'drizzle-orm/mysql2';
 * import mysql from 'mysql2/promise';
 * import { applyMysqlMigrations, mysqlKeysTable } from 'drizzle-idempotency/mysql';
 *
 * const db = drizzle({ client: mysql.createPool(process.env.MYSQL_URL ?? '') });
 * await applyMysqlMigrations(db, { table: mysqlKeysTable('idempotency_keys') });
 * ```
 * @throws {@link SchemaMismatchError} when a foreign table is in the way
 */
export async function applyMysqlMigrations(
  db: AnyMysqlDatabase,
  options: MysqlMigrationOptions = {},
): Promise<void> {
  const { name: table } = resolveMysqlTable(options);
  await migrateAsync(
    {
      ...mysqlMigrationStatements,
      session: sessionOf(db),
      // A transaction is how drizzle lends one connection of a pool. The DDL commits it
      // implicitly, which is harmless: GET_LOCK belongs to the connection, not to the
      // transaction, and READ COMMITTED lets every read see what an earlier lock holder committed.
      locked: (run) =>
        withClusterLock(db, table, LOCK_TIMEOUT_SECONDS, () =>
          db.transaction(
            async (tx) => {
              const [locked] = await queryRows<{ got: number | null }>(
                tx,
                sql`SELECT GET_LOCK(${lockName(table)}, ${LOCK_TIMEOUT_SECONDS}) AS got`,
              );
              if (Number(locked?.got) !== 1) {
                throw new Error(
                  `could not take the migrations lock for ${table} within ${LOCK_TIMEOUT_SECONDS} s`,
                );
              }
              try {
                await assertAdoptableMysqlKeysTable(retryingDeadlocks(tx), options);
                await run(sessionOf(tx));
              } finally {
                await tx.execute(sql`SELECT RELEASE_LOCK(${lockName(table)})`);
              }
            },
            { isolationLevel: 'read committed' },
          ),
        ),
    },
    { table, migrations: mysqlMigrations, committed: mysqlMigrations },
  );
}

/**
 * Tells, without writing, whether the keys table exists and which of the library's migrations
 * {@link applyMysqlMigrations} would apply, by the migrator's own decision (its journal, the
 * columns already there). A table made by the application's own drizzle-kit migrations has no
 * missing columns: only the journal is behind, and the first migration run records it.
 *
 * @example
 * ```ts
 * import { drizzle } from 'drizzle-orm/mysql2';
 * import mysql from 'mysql2/promise';
 * import { mysqlMigrationStatus } from 'drizzle-idempotency/mysql';
 *
 * const db = drizzle({ client: mysql.createPool(process.env.MYSQL_URL ?? '') });
 * const { pending } = await mysqlMigrationStatus(db);
 * ```
 * @param db - a drizzle MySQL database
 * @param options - the keys table, when not the default
 * @throws {@link SchemaMismatchError} when a foreign table of that name is in the way
 */
export async function mysqlMigrationStatus(
  db: Pick<AnyMysqlDatabase, 'execute'>,
  options: MysqlMigrationOptions = {},
): Promise<MigrationStatus> {
  const { name: table } = resolveMysqlTable(options);
  await assertAdoptableMysqlKeysTable(retryingDeadlocks(db), options);
  return readMigrationStatus(
    mysqlMigrationStatements,
    { table, migrations: mysqlMigrations, committed: mysqlMigrations },
    sessionOf(db),
  );
}
