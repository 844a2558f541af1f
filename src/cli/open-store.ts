import { existsSync } from 'node:fs';
import type BetterSqlite3 from 'better-sqlite3';
import type { Pool as MysqlPool } from 'mysql2/promise';
import type { Pool } from 'pg';
import { DatabaseOpenError } from '../core/errors.js';
import { type JournalRow, type MigrationFile, pendingMigrations } from '../core/journal.js';
import type { LeasedIdempotencyStore } from '../core/store.js';
import { DEFAULT_TABLE_NAME, migrationsTableName } from '../core/table-name.js';
import { mysqlMigrations, pgMigrations, sqliteMigrations } from '../generated/migrations.js';
import { quoteIdentifier } from '../pg/identifier.js';
import { openPgStore } from '../pg/open.js';
import { DEFAULT_PG_SCHEMA, pgKeysTable } from '../pg/schema.js';
import { printableWord } from './keys.js';
import { describeLocation, maskSecrets, type StoreLocation, urlSecrets } from './location.js';

/** An open store and what ends it. */
export interface CliStore {
  readonly store: LeasedIdempotencyStore;
  /** Closes the store and its connections, so the process can exit. */
  close(): Promise<void>;
}

/**
 * What a command does to its store:
 * - `migrate` creates a missing store and brings it up to date (only `idem migrate`);
 * - `write` deletes rows (purge, sweep, release) and `read` only reads (stats, pending, show, …):
 *   neither creates nor migrates anything, so a mistyped path, URL, schema or table, or a store
 *   an older version made, is refused with the `idem migrate` hint instead of becoming a new,
 *   empty or upgraded store behind the operator's back. `read` also leaves a SQLite file's bytes
 *   as they were.
 */
export type StoreMode = 'migrate' | 'write' | 'read';

// Node reports a refused connection to a name with several addresses as an AggregateError
// whose own message is empty: take the first attempt's message instead. A driver's message may
// quote the connection string: its password is hidden.
function reason(error: unknown, url: string): string {
  let text: string;
  if (!(error instanceof Error)) text = String(error);
  else if (error.message !== '') text = error.message;
  else {
    const [first] = error instanceof AggregateError ? error.errors : [];
    text =
      first instanceof Error ? first.message : ((error as { code?: string }).code ?? error.name);
  }
  return maskSecrets(text, urlSecrets(url));
}

/** The command that creates or upgrades the store at `location`, for messages. */
export function migrateHint(location: StoreLocation): string {
  const table = location.table === DEFAULT_TABLE_NAME ? '' : ` --table ${location.table}`;
  if (location.dialect === 'sqlite')
    return `idem migrate --db ${printableWord(location.path)}${table}`;
  const schema =
    location.dialect === 'pg' && location.schema !== DEFAULT_PG_SCHEMA
      ? ` --schema ${location.schema}`
      : '';
  return `idem migrate --url URL${schema}${table}`;
}

function missingTable(location: StoreLocation): DatabaseOpenError {
  return new DatabaseOpenError(
    `no ${location.table} table at ${describeLocation(location)}: create it with "${migrateHint(location)}"`,
  );
}

function outdated(location: StoreLocation, pending: readonly MigrationFile[]): DatabaseOpenError {
  return new DatabaseOpenError(
    `the ${location.table} table at ${describeLocation(location)} lacks ${pending.length} migration(s) of this version: bring it up to date with "${migrateHint(location)}"`,
  );
}

const COMMITTED = { sqlite: sqliteMigrations, pg: pgMigrations, mysql: mysqlMigrations } as const;

function isSqliteError(error: unknown, code: string): boolean {
  return error instanceof Error && (error as { code?: unknown }).code === code;
}

// Read without writing: SQLite creates no file for a connection that must find one, and reading
// neither changes the journal mode nor leaves a -wal file behind once the connection closes.
async function inspectSqlite(
  location: Extract<StoreLocation, { dialect: 'sqlite' }>,
): Promise<BetterSqlite3.Database> {
  const path = printableWord(location.path);
  if (location.path !== ':memory:' && !existsSync(location.path)) {
    throw new DatabaseOpenError(
      `no database at ${path}: create it with "${migrateHint(location)}"`,
    );
  }
  const [{ default: Database }, { assertAdoptableSqliteKeysTable }, { sqliteKeysTable }] =
    await Promise.all([
      import('better-sqlite3'),
      import('../sqlite/migrate.js'),
      import('../sqlite-dialect/schema.js'),
    ]);
  let client: BetterSqlite3.Database;
  try {
    client = new Database(location.path, { fileMustExist: true, timeout: 5000 });
  } catch (error) {
    throw new DatabaseOpenError(`cannot open ${path}: ${(error as Error).message}`, error);
  }
  try {
    const exists = (name: string) =>
      client.prepare("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?").get(name) !==
      undefined;
    assertAdoptableSqliteKeysTable(client, { table: sqliteKeysTable(location.table) });
    if (!exists(location.table)) throw missingTable(location);
    const journal = migrationsTableName(location.table);
    const rows = exists(journal)
      ? (client.prepare(`SELECT hash, created_at FROM "${journal}"`).all() as JournalRow[])
      : [];
    const pending = pendingMigrations(COMMITTED.sqlite, rows);
    if (pending.length > 0) throw outdated(location, pending);
    return client;
  } catch (error) {
    client.close();
    if (isSqliteError(error, 'SQLITE_NOTADB')) {
      throw new DatabaseOpenError(`cannot open ${path}: the file is not a SQLite database`, error);
    }
    if (isSqliteError(error, 'SQLITE_CORRUPT')) {
      throw new DatabaseOpenError(`cannot open ${path}: the database file is damaged`, error);
    }
    throw error;
  }
}

async function openSqlite(
  location: Extract<StoreLocation, { dialect: 'sqlite' }>,
  mode: StoreMode,
): Promise<CliStore> {
  // Loaded here so that PostgreSQL users need not install `better-sqlite3`.
  const [{ openSqliteStore }, { SqliteIdempotencyStore }, { sqliteKeysTable }, { drizzle }] =
    await Promise.all([
      import('../sqlite/open.js'),
      import('../sqlite/store.js'),
      import('../sqlite-dialect/schema.js'),
      import('drizzle-orm/better-sqlite3'),
    ]);
  const table = sqliteKeysTable(location.table);
  if (mode === 'read') {
    const client = await inspectSqlite(location);
    const store = new SqliteIdempotencyStore(drizzle({ client }), {
      table,
      onClose: () => client.close(),
    });
    return { store, close: async () => store.close() };
  }
  if (mode === 'write') (await inspectSqlite(location)).close();
  const store = openSqliteStore(location.path, { table });
  return { store, close: async () => store.close() };
}

async function openPg(
  location: Extract<StoreLocation, { dialect: 'pg' }>,
  mode: StoreMode,
): Promise<CliStore> {
  // Loaded here so that SQLite users need not install `pg`.
  const { default: pg } = await import('pg');
  // One connection: a command runs one statement at a time.
  const pool: Pool = new pg.Pool({ connectionString: location.url, max: 1 });
  // A connection broken while idle is discarded by the pool; without a listener Node would end
  // the process on the `error` event instead of letting the next query fail with a message.
  pool.on('error', () => undefined);
  const qualified = (name: string) =>
    `${quoteIdentifier(location.schema)}.${quoteIdentifier(name)}`;
  try {
    const journal = qualified(migrationsTableName(location.table));
    let found: { table: boolean; journal: boolean };
    try {
      const result = await pool.query<{ table: boolean; journal: boolean }>(
        'SELECT to_regclass($1) IS NOT NULL AS table, to_regclass($2) IS NOT NULL AS journal',
        [qualified(location.table), journal],
      );
      found = result.rows[0] ?? { table: false, journal: false };
    } catch (error) {
      throw new DatabaseOpenError(
        `cannot connect to PostgreSQL at ${describeLocation(location)}: ${reason(error, location.url)}`,
        error,
      );
    }
    // A missing table is refused, as a missing SQLite file is. The schema `public` always
    // exists, so the table, not the schema, is what tells a store apart.
    if (mode !== 'migrate') {
      if (!found.table) throw missingTable(location);
      const rows = found.journal
        ? (await pool.query<JournalRow>(`SELECT hash, created_at FROM ${journal}`)).rows
        : [];
      const pending = pendingMigrations(COMMITTED.pg, rows);
      if (pending.length > 0) throw outdated(location, pending);
    }
    // Up to date, the store's own migrator only reads.
    const store = await openPgStore(pool, {
      table: pgKeysTable(location.table, { schema: location.schema }),
      prepare: location.prepare !== false,
    });
    return {
      store,
      close: async () => {
        await store.close();
        await pool.end();
      },
    };
  } catch (error) {
    await pool.end();
    throw error;
  }
}

async function mysqlTablesFound(pool: MysqlPool, names: readonly string[]): Promise<Set<string>> {
  const [rows] = (await pool.query(
    'SELECT TABLE_NAME AS name FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME IN (?)',
    [names],
  )) as unknown as [{ name: string }[]];
  return new Set(rows.map((row) => row.name));
}

// Which part of a MySQL URL mysql2 could not percent-decode, or the driver's own reason.
function unusableMysqlUrl(error: unknown, url: string): string {
  if (!(error instanceof URIError)) return reason(error, url);
  const parsed = new URL(url);
  const parts: [string, string][] = [
    ['user name', parsed.username],
    ['password', parsed.password],
    ['host', parsed.hostname],
    ['database name', parsed.pathname.slice(1)],
  ];
  const broken = parts.find(([, text]) => {
    try {
      decodeURIComponent(text);
      return false;
    } catch {
      return true;
    }
  });
  return `the ${broken?.[0] ?? 'connection string'} holds a malformed percent-escape: write % as %25, and every escape as % and two hex digits of UTF-8`;
}

/**
 * The one-connection MySQL pool a command uses (a command runs one statement at a time). mysql2
 * reads the URL when the pool is made and throws a bare URIError or TypeError for what it cannot
 * use (a malformed percent-escape, an unknown `ssl` profile): that becomes one line saying what
 * is wrong, as a connection failure does.
 *
 * @param mysql - the loaded `mysql2/promise` module
 * @param location - the MySQL store location
 * @throws {@link DatabaseOpenError} when mysql2 refuses the URL
 */
export function cliMysqlPool(
  mysql: Pick<typeof import('mysql2/promise'), 'createPool'>,
  location: Extract<StoreLocation, { dialect: 'mysql' }>,
): MysqlPool {
  try {
    return mysql.createPool({ uri: location.url, connectionLimit: 1, charset: 'utf8mb4' });
  } catch (error) {
    throw new DatabaseOpenError(
      `cannot open MySQL at ${describeLocation(location)}: ${unusableMysqlUrl(error, location.url)}`,
      error,
    );
  }
}

async function openMysql(
  location: Extract<StoreLocation, { dialect: 'mysql' }>,
  mode: StoreMode,
): Promise<CliStore> {
  // Loaded here so that users of the other dialects need not install `mysql2`.
  const [{ default: mysql }, { openMysqlStore }, { mysqlKeysTable }] = await Promise.all([
    import('mysql2/promise'),
    import('../mysql/open.js'),
    import('../mysql/schema.js'),
  ]);
  const pool = cliMysqlPool(mysql, location);
  try {
    const journal = migrationsTableName(location.table);
    let found: Set<string>;
    try {
      found = await mysqlTablesFound(pool, [location.table, journal]);
    } catch (error) {
      throw new DatabaseOpenError(
        `cannot connect to MySQL at ${describeLocation(location)}: ${reason(error, location.url)}`,
        error,
      );
    }
    if (mode !== 'migrate') {
      if (!found.has(location.table)) throw missingTable(location);
      const [rows] = found.has(journal)
        ? ((await pool.query(`SELECT hash, created_at FROM ${quoteMysql(journal)}`)) as unknown as [
            JournalRow[],
          ])
        : [[]];
      const pending = pendingMigrations(COMMITTED.mysql, rows);
      if (pending.length > 0) throw outdated(location, pending);
    }
    const store = await openMysqlStore(pool, { table: mysqlKeysTable(location.table) });
    return {
      store,
      close: async () => {
        await store.close();
        await pool.end();
      },
    };
  } catch (error) {
    await pool.end();
    throw error;
  }
}

// Table names are letters, digits and underscores (assertTableName): quoting cannot be escaped.
function quoteMysql(name: string): string {
  return `\`${name}\``;
}

/**
 * Opens the store a command works on, as `mode` allows (see {@link StoreMode}): only `migrate`
 * creates or upgrades a store; any other command refuses a missing or outdated one with exit 1
 * and the `idem migrate` command to run.
 *
 * @param location - the resolved store location
 * @param mode - what the command does to the store
 * @throws {@link DatabaseOpenError} when the store is missing or outdated (and may not be
 * migrated), cannot be opened, or the server cannot be reached
 */
export async function openCliStore(location: StoreLocation, mode: StoreMode): Promise<CliStore> {
  if (location.dialect === 'sqlite') return openSqlite(location, mode);
  return location.dialect === 'pg' ? openPg(location, mode) : openMysql(location, mode);
}

/**
 * Runs `use` on the store at `location` and closes it afterwards, whatever happens, so a server
 * pool never keeps the process alive.
 *
 * @param mode - what the command does to the store (see {@link StoreMode})
 */
export async function withStore<R>(
  location: StoreLocation,
  mode: StoreMode,
  use: (store: LeasedIdempotencyStore) => Promise<R>,
): Promise<R> {
  const opened = await openCliStore(location, mode);
  try {
    return await use(opened.store);
  } finally {
    await opened.close();
  }
}
