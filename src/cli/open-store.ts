import { existsSync } from 'node:fs';
import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import type BetterSqlite3 from 'better-sqlite3';
import { type Column, inArray, type SQL, sql } from 'drizzle-orm';
import type { BaseSQLiteDatabase } from 'drizzle-orm/sqlite-core';
import type { Pool as MysqlPool } from 'mysql2/promise';
import type { Pool } from 'pg';
import type { EncryptionOption } from '../core/encryption.js';
import { DatabaseOpenError, IdempotencyError } from '../core/errors.js';
import type { MigrationStatus } from '../core/migrator.js';
import type { LeasedIdempotencyStore } from '../core/store.js';
import { DEFAULT_TABLE_NAME } from '../core/table-name.js';
import { openPgStore } from '../pg/open.js';
import { DEFAULT_PG_SCHEMA, pgKeysTable } from '../pg/schema.js';
import { sqliteMigrationStatus } from '../sqlite/migrate.js';
import type { SqliteKeysTable } from '../sqlite-dialect/schema.js';
import { KEYRING_VARIABLE, keyringFromEnvironment } from './keyring.js';
import { printableWord, splitStoredId } from './keys.js';
import { describeLocation, maskSecrets, type StoreLocation, urlSecrets } from './location.js';

// The keyring of IDEM_ENCRYPTION_KEYS, as the store's option: every command reads and writes
// answers as the application does.
function cliEncryption(): EncryptionOption {
  const encryption = keyringFromEnvironment(process.env[KEYRING_VARIABLE]);
  return encryption === undefined ? {} : { encryption };
}

/** An open store and what ends it. */
export interface CliStore {
  readonly store: LeasedIdempotencyStore;
  /**
   * The stored ids that hold `key` under a scope (at most {@link MAX_SCOPES_LISTED}), so that a
   * key looked up without its scope can name them. Present on every store a read command opens.
   */
  readonly scopedIds?: (key: string) => Promise<string[]>;
  /**
   * The recorded steps' text (the `steps` column) of each of the rows `ids` that holds any, for
   * `idem pending` to show each key's last recorded step. Present where `scopedIds` is.
   */
  readonly recordedSteps?: (ids: readonly string[]) => Promise<Map<string, string>>;
  /** Closes the store and its connections, so the process can exit. */
  close(): Promise<void>;
}

/** How many scoped ids of one key a lookup lists at most. */
const MAX_SCOPES_LISTED = 20;

// The LIKE pattern of the ids that end in the scope separator and `key`, `!` escaping.
function scopedIdPattern(key: string): string {
  return `%\u001f${key.replace(/[!%_]/g, (char) => `!${char}`)}`;
}

// The ids a LIKE over-matched (SQLite's LIKE ignores ASCII case) are dropped by an exact check.
function exactScopedIds(key: string, ids: readonly { id: string }[]): string[] {
  return ids.map((row) => row.id).filter((id) => splitStoredId(id)?.key === key);
}

/**
 * Reads the `steps` column of the rows `ids`. A table whose steps migration has not run (a read
 * leaves it as it is) has no such column, and its keys no steps: it reads as none.
 */
function recordedStepsOf(
  read: (
    ids: string[],
  ) =>
    | readonly { id: string; steps: string | null }[]
    | Promise<readonly { id: string; steps: string | null }[]>,
): (ids: readonly string[]) => Promise<Map<string, string>> {
  return async (ids) => {
    const found = new Map<string, string>();
    if (ids.length === 0) return found;
    let rows: readonly { id: string; steps: string | null }[];
    try {
      rows = await read([...ids]);
    } catch {
      return found;
    }
    for (const row of rows) if (row.steps !== null) found.set(row.id, row.steps);
    return found;
  };
}

/** The condition and limit of a scoped-id lookup on the keys table's `id` column. */
function scopedIdCondition(column: Column, key: string): SQL {
  return sql`${column} LIKE ${scopedIdPattern(key)} ESCAPE '!'`;
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
function migrateHint(location: StoreLocation): string {
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

/**
 * Refuses a store the command may not use as it is: a missing table, or one an older version
 * made that lacks columns of this one (only `idem migrate` adds them). A table made by the
 * application's own drizzle-kit migrations has this version's columns and no journal of ours: it
 * is read as it is, and the store's migrator records it in the journal on the first write
 * command.
 */
function assertUsable(location: StoreLocation, status: MigrationStatus): void {
  if (!status.table) throw missingTable(location);
  if (status.missingColumns.length === 0) return;
  throw new DatabaseOpenError(
    `the ${location.table} table at ${describeLocation(location)} lacks ${status.pending.length} migration(s) of this version (columns ${status.missingColumns.join(', ')}): bring it up to date with "${migrateHint(location)}"`,
  );
}

/** What the CLI says when a driver it needs is not installed. */
function driverMissing(need: string, packages: readonly string[]): DatabaseOpenError {
  const install = packages.map((name) => `"npm install ${name}"`).join(' or ');
  return new DatabaseOpenError(
    `${need} needs the ${packages.join(' or the ')} package, which is not installed here: install it with ${install}`,
  );
}

// Node's answer to an import of a package that is not installed names the package in quotes.
function isMissingPackage(error: unknown, name: string): boolean {
  const code = (error as { code?: unknown } | null)?.code;
  return (
    (code === 'ERR_MODULE_NOT_FOUND' || code === 'MODULE_NOT_FOUND') &&
    error instanceof Error &&
    error.message.includes(`'${name}'`)
  );
}

/**
 * Loads a driver of the application's, or answers `undefined` when the application does not
 * have it installed. Any other failure to load it is thrown as it is.
 */
async function optionalDriver<M>(name: string, load: () => Promise<M>): Promise<M | undefined> {
  try {
    return await load();
  } catch (error) {
    if (isMissingPackage(error, name)) return undefined;
    throw error;
  }
}

/** Loads a driver the command cannot do without, or refuses in one line naming the package. */
async function requiredDriver<M>(name: string, need: string, load: () => Promise<M>): Promise<M> {
  const loaded = await optionalDriver(name, load);
  if (loaded === undefined) throw driverMissing(need, [name]);
  return loaded;
}

type SqliteLocation = Extract<StoreLocation, { dialect: 'sqlite' }>;

function sqliteOpenFailure(path: string, error: unknown): DatabaseOpenError {
  const code = (error as { code?: unknown } | null)?.code;
  if (code === 'SQLITE_NOTADB') {
    return new DatabaseOpenError(`cannot open ${path}: the file is not a SQLite database`, error);
  }
  if (code === 'SQLITE_CORRUPT') {
    return new DatabaseOpenError(`cannot open ${path}: the database file is damaged`, error);
  }
  return new DatabaseOpenError(`cannot open ${path}: ${(error as Error).message}`, error);
}

// The error a check threw, kept as it is when it already says what is wrong (a refusal, a foreign
// table), else described as the file it could not read.
function sqliteFailure(path: string, error: unknown): unknown {
  return error instanceof IdempotencyError ? error : sqliteOpenFailure(path, error);
}

/** The scoped-id lookup of `key` on a SQLite keys table, in either driver's mode. */
function sqliteScopedIds<K extends 'sync' | 'async'>(
  db: BaseSQLiteDatabase<K, unknown>,
  table: SqliteKeysTable,
  key: string,
) {
  return db.all<{ id: string }>(
    sql`SELECT ${table.id} FROM ${table} WHERE ${scopedIdCondition(table.id, key)} LIMIT ${MAX_SCOPES_LISTED}`,
  );
}

/** The `steps` column of the rows `ids` of a SQLite keys table, in either driver's mode. */
function sqliteStepRows<K extends 'sync' | 'async'>(
  db: BaseSQLiteDatabase<K, unknown>,
  table: SqliteKeysTable,
  ids: string[],
) {
  return db.all<{ id: string; steps: string | null }>(
    sql`SELECT ${table.id}, ${table.steps} FROM ${table} WHERE ${inArray(table.id, ids)}`,
  );
}

/** A connection to a SQLite file that reads without writing, through one driver. */
interface SqliteFileReader {
  /** The table's migration status, as the driver's migrator decides it. */
  status(): MigrationStatus | Promise<MigrationStatus>;
  /** A store over this connection that closes it when the store closes. */
  store(
    options: { table: SqliteKeysTable; onClose: () => void } & EncryptionOption,
  ): LeasedIdempotencyStore;
  /** The ids of the keys table that the scoped-id lookup of `key` matches. */
  scopedIdRows(key: string): { id: string }[] | Promise<{ id: string }[]>;
  /** The `steps` column of the rows `ids`. */
  stepRows(
    ids: string[],
  ): { id: string; steps: string | null }[] | Promise<{ id: string; steps: string | null }[]>;
  /** Closes the connection. */
  close(): void;
}

/** What opens a SQLite file through one driver, for {@link openSqliteFile}. */
interface SqliteFileDriver {
  /** Connects to the existing file to read `table`; throws when the file cannot be opened. */
  read(table: SqliteKeysTable): SqliteFileReader;
  /** Opens the full store, which creates or migrates the table as needed. */
  open(options: { table: SqliteKeysTable } & EncryptionOption): Promise<LeasedIdempotencyStore>;
}

// Read without writing: the reader's connection creates no file and reading neither changes the
// journal mode nor leaves a -wal file behind once it closes. Only `write` then opens the store,
// whose migrator records a table the application made.
async function openSqliteFile(
  location: SqliteLocation,
  mode: StoreMode,
  driver: SqliteFileDriver,
): Promise<CliStore> {
  const { sqliteKeysTable } = await import('../sqlite-dialect/schema.js');
  const table = sqliteKeysTable(location.table);
  const path = printableWord(location.path);
  if (mode !== 'migrate') {
    let reader: SqliteFileReader;
    try {
      reader = driver.read(table);
    } catch (error) {
      throw sqliteOpenFailure(path, error);
    }
    try {
      assertUsable(location, await reader.status());
      if (mode === 'read') {
        const store = reader.store({ table, onClose: () => reader.close(), ...cliEncryption() });
        const scopedIds = async (key: string) =>
          exactScopedIds(key, await reader.scopedIdRows(key));
        const recordedSteps = recordedStepsOf((ids) => reader.stepRows(ids));
        return { store, scopedIds, recordedSteps, close: async () => store.close() };
      }
    } catch (error) {
      reader.close();
      throw sqliteFailure(path, error);
    }
    reader.close();
  }
  const store = await driver.open({ table, ...cliEncryption() });
  return { store, close: async () => store.close() };
}

// better-sqlite3 creates no file for a connection that must find one.
async function openBetterSqlite(
  location: SqliteLocation,
  mode: StoreMode,
  Database: typeof BetterSqlite3,
): Promise<CliStore> {
  const [{ openSqliteStore }, { SqliteIdempotencyStore }, { drizzle }] = await Promise.all([
    import('../sqlite/open.js'),
    import('../sqlite/store.js'),
    import('drizzle-orm/better-sqlite3'),
  ]);
  return openSqliteFile(location, mode, {
    read(table) {
      const client = new Database(location.path, { fileMustExist: true, timeout: 5000 });
      const db = drizzle({ client });
      return {
        status: () => sqliteMigrationStatus(db, { table }),
        store: (options) => new SqliteIdempotencyStore(db, options),
        scopedIdRows: (key) => sqliteScopedIds(db, table, key),
        stepRows: (ids) => sqliteStepRows(db, table, ids),
        close: () => client.close(),
      };
    },
    open: async (options) => openSqliteStore(location.path, options),
  });
}

// The same through @libsql/client, for an application that reads its SQLite file with libSQL and
// has no native better-sqlite3 build.
async function openLibsqlFile(
  location: SqliteLocation,
  mode: StoreMode,
  libsql: typeof import('@libsql/client'),
): Promise<CliStore> {
  const [{ openLibsqlStore }, { LibsqlIdempotencyStore }, { libsqlMigrationStatus }, { drizzle }] =
    await Promise.all([
      import('../libsql/open.js'),
      import('../libsql/store.js'),
      import('../libsql/migrate.js'),
      import('drizzle-orm/libsql'),
    ]);
  const url = pathToFileURL(resolve(location.path)).href;
  return openSqliteFile(location, mode, {
    read(table) {
      const client = libsql.createClient({ url });
      const db = drizzle({ client });
      return {
        status: () => libsqlMigrationStatus(db, { table }),
        store: (options) => new LibsqlIdempotencyStore(db, options),
        scopedIdRows: (key) => sqliteScopedIds(db, table, key),
        stepRows: (ids) => sqliteStepRows(db, table, ids),
        close: () => client.close(),
      };
    },
    open: (options) => openLibsqlStore(url, options),
  });
}

async function openSqlite(location: SqliteLocation, mode: StoreMode): Promise<CliStore> {
  if (mode !== 'migrate' && location.path !== ':memory:' && !existsSync(location.path)) {
    throw new DatabaseOpenError(
      `no database at ${printableWord(location.path)}: create it with "${migrateHint(location)}"`,
    );
  }
  // Whichever SQLite driver the application has: better-sqlite3 first, libSQL's otherwise.
  const better = await optionalDriver('better-sqlite3', () => import('better-sqlite3'));
  if (better !== undefined) return openBetterSqlite(location, mode, better.default);
  const libsql = await optionalDriver('@libsql/client', () => import('@libsql/client'));
  if (libsql !== undefined && location.path !== ':memory:') {
    return openLibsqlFile(location, mode, libsql);
  }
  throw driverMissing('a SQLite database file', ['better-sqlite3', '@libsql/client']);
}

async function openPg(
  location: Extract<StoreLocation, { dialect: 'pg' }>,
  mode: StoreMode,
): Promise<CliStore> {
  // Loaded here so that SQLite users need not install `pg`.
  const { default: pg } = await requiredDriver('pg', 'a PostgreSQL URL', () => import('pg'));
  const [{ drizzle }, { pgMigrationStatus }, { PgIdempotencyStore }] = await Promise.all([
    import('drizzle-orm/node-postgres'),
    import('../pg/migrate.js'),
    import('../pg/store.js'),
  ]);
  // One connection: a command runs one statement at a time.
  const pool: Pool = new pg.Pool({ connectionString: location.url, max: 1 });
  // A connection broken while idle is discarded by the pool; without a listener Node would end
  // the process on the `error` event instead of letting the next query fail with a message.
  pool.on('error', () => undefined);
  try {
    const table = pgKeysTable(location.table, { schema: location.schema });
    const prepare = location.prepare !== false;
    const scopedIds = async (key: string) =>
      exactScopedIds(
        key,
        await drizzle({ client: pool })
          .select({ id: table.id })
          .from(table)
          .where(scopedIdCondition(table.id, key))
          .limit(MAX_SCOPES_LISTED),
      );
    const recordedSteps = recordedStepsOf((ids) =>
      drizzle({ client: pool })
        .select({ id: table.id, steps: table.steps })
        .from(table)
        .where(inArray(table.id, ids)),
    );
    try {
      await pool.query('SELECT 1');
    } catch (error) {
      throw new DatabaseOpenError(
        `cannot connect to PostgreSQL at ${describeLocation(location)}: ${reason(error, location.url)}`,
        error,
      );
    }
    // A missing table is refused, as a missing SQLite file is. The schema `public` always
    // exists, so the table, not the schema, is what tells a store apart.
    if (mode !== 'migrate') {
      const status = await pgMigrationStatus(drizzle({ client: pool }), { table });
      assertUsable(location, status);
      // Reading writes nothing, not even the journal of a table the application made.
      if (mode === 'read' && status.pending.length > 0) {
        const store = new PgIdempotencyStore(drizzle({ client: pool }), { table, prepare });
        return {
          store,
          scopedIds,
          recordedSteps,
          close: async () => {
            await store.close();
            await pool.end();
          },
        };
      }
    }
    // Up to date, the store's own migrator only reads.
    const store = await openPgStore(pool, { table, prepare, ...cliEncryption() });
    return {
      store,
      scopedIds,
      recordedSteps,
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
  const { default: mysql } = await requiredDriver(
    'mysql2',
    'a MySQL URL',
    () => import('mysql2/promise'),
  );
  const [
    { openMysqlStore },
    { mysqlKeysTable },
    { mysqlMigrationStatus },
    { MysqlIdempotencyStore },
    { drizzle },
  ] = await Promise.all([
    import('../mysql/open.js'),
    import('../mysql/schema.js'),
    import('../mysql/migrate.js'),
    import('../mysql/store.js'),
    import('drizzle-orm/mysql2'),
  ]);
  const pool = cliMysqlPool(mysql, location);
  try {
    const table = mysqlKeysTable(location.table);
    const scopedIds = async (key: string) =>
      exactScopedIds(
        key,
        await drizzle({ client: pool })
          .select({ id: table.id })
          .from(table)
          .where(scopedIdCondition(table.id, key))
          .limit(MAX_SCOPES_LISTED),
      );
    const recordedSteps = recordedStepsOf((ids) =>
      drizzle({ client: pool })
        .select({ id: table.id, steps: table.steps })
        .from(table)
        .where(inArray(table.id, ids)),
    );
    try {
      await pool.query('SELECT 1');
    } catch (error) {
      throw new DatabaseOpenError(
        `cannot connect to MySQL at ${describeLocation(location)}: ${reason(error, location.url)}`,
        error,
      );
    }
    if (mode !== 'migrate') {
      const status = await mysqlMigrationStatus(drizzle({ client: pool }), { table });
      assertUsable(location, status);
      // Reading writes nothing, not even the journal of a table the application made.
      if (mode === 'read' && status.pending.length > 0) {
        const store = new MysqlIdempotencyStore(drizzle({ client: pool }), { table });
        return {
          store,
          scopedIds,
          recordedSteps,
          close: async () => {
            await store.close();
            await pool.end();
          },
        };
      }
    }
    const store = await openMysqlStore(pool, { table, ...cliEncryption() });
    return {
      store,
      scopedIds,
      recordedSteps,
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
async function openCliStore(location: StoreLocation, mode: StoreMode): Promise<CliStore> {
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
  use: (store: LeasedIdempotencyStore, opened: CliStore) => Promise<R>,
): Promise<R> {
  const opened = await openCliStore(location, mode);
  try {
    return await use(opened.store, opened);
  } finally {
    await opened.close();
  }
}
