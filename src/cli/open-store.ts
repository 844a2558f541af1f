import { existsSync } from 'node:fs';
import type { Pool } from 'pg';
import { DatabaseOpenError } from '../core/errors.js';
import type { LeasedIdempotencyStore } from '../core/store.js';
import { quoteIdentifier } from '../pg/identifier.js';
import { openPgStore } from '../pg/open.js';
import { pgKeysTable } from '../pg/schema.js';
import { describeLocation, type StoreLocation } from './location.js';

/** An open store and what ends it. */
export interface CliStore {
  readonly store: LeasedIdempotencyStore;
  /** Closes the store and its connections, so the process can exit. */
  close(): Promise<void>;
}

// Node reports a refused connection to a name with several addresses as an AggregateError
// whose own message is empty: take the first attempt's message instead.
function reason(error: unknown): string {
  if (!(error instanceof Error)) return String(error);
  if (error.message !== '') return error.message;
  const [first] = error instanceof AggregateError ? error.errors : [];
  return first instanceof Error ? first.message : ((error as { code?: string }).code ?? error.name);
}

async function openSqlite(
  location: Extract<StoreLocation, { dialect: 'sqlite' }>,
  create: boolean,
): Promise<CliStore> {
  if (!create && location.path !== ':memory:' && !existsSync(location.path)) {
    throw new DatabaseOpenError(
      `no database at ${location.path}: create it with "idem migrate --db ${location.path}"`,
    );
  }
  // Loaded here so that PostgreSQL users need not install `better-sqlite3`.
  const [{ openSqliteStore }, { sqliteKeysTable }] = await Promise.all([
    import('../sqlite/open.js'),
    import('../sqlite/schema.js'),
  ]);
  const store = openSqliteStore(location.path, { table: sqliteKeysTable(location.table) });
  return { store, close: async () => store.close() };
}

async function openPg(
  location: Extract<StoreLocation, { dialect: 'pg' }>,
  create: boolean,
): Promise<CliStore> {
  // Loaded here so that SQLite users need not install `pg`.
  const { default: pg } = await import('pg');
  // One connection: a command runs one statement at a time.
  const pool: Pool = new pg.Pool({ connectionString: location.url, max: 1 });
  // A connection broken while idle is discarded by the pool; without a listener Node would end
  // the process on the `error` event instead of letting the next query fail with a message.
  pool.on('error', () => undefined);
  try {
    const table = `${quoteIdentifier(location.schema)}.${quoteIdentifier(location.table)}`;
    let found: boolean;
    try {
      const result = await pool.query<{ found: boolean }>(
        'SELECT to_regclass($1) IS NOT NULL AS found',
        [table],
      );
      found = result.rows[0]?.found === true;
    } catch (error) {
      throw new DatabaseOpenError(
        `cannot connect to PostgreSQL at ${describeLocation(location)}: ${reason(error)}`,
        error,
      );
    }
    // A missing table is refused, as a missing SQLite file is: a mistyped URL or schema would
    // otherwise report an empty new store as if all were well. The schema `public` always
    // exists, so the table, not the schema, is what tells a store apart.
    if (!create && !found) {
      throw new DatabaseOpenError(
        `no ${location.table} table at ${describeLocation(location)}: create it with "idem migrate --url URL --schema ${location.schema} --table ${location.table}"`,
      );
    }
    const store = await openPgStore(pool, {
      table: pgKeysTable({ name: location.table, schema: location.schema }),
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

async function openMysql(
  location: Extract<StoreLocation, { dialect: 'mysql' }>,
  create: boolean,
): Promise<CliStore> {
  // Loaded here so that users of the other dialects need not install `mysql2`.
  const [{ default: mysql }, { openMysqlStore }, { mysqlKeysTable }] = await Promise.all([
    import('mysql2/promise'),
    import('../mysql/open.js'),
    import('../mysql/schema.js'),
  ]);
  // One connection: a command runs one statement at a time.
  const pool = mysql.createPool({ uri: location.url, connectionLimit: 1, charset: 'utf8mb4' });
  try {
    let found: boolean;
    try {
      const [rows] = (await pool.query(
        'SELECT count(*) AS found FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = ?',
        [location.table],
      )) as unknown as [{ found: number }[]];
      found = Number(rows[0]?.found) > 0;
    } catch (error) {
      throw new DatabaseOpenError(
        `cannot connect to MySQL at ${describeLocation(location)}: ${reason(error)}`,
        error,
      );
    }
    // A missing table is refused, as a missing SQLite file is: a mistyped URL would otherwise
    // report an empty new store as if all were well.
    if (!create && !found) {
      throw new DatabaseOpenError(
        `no ${location.table} table at ${describeLocation(location)}: create it with "idem migrate --url URL --table ${location.table}"`,
      );
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

/**
 * Opens the store a command works on. Only `migrate` creates a missing store (a SQLite file, or
 * the `keys` table in a PostgreSQL schema or MySQL database): any other command on a mistyped path, URL or schema
 * would otherwise report an empty new database as if all were well. An existing store is brought
 * up to date by the migrations on every dialect.
 *
 * @param location - the resolved store location
 * @param create - whether a missing store may be created
 * @throws {@link DatabaseOpenError} when the store is missing (and may not be created), cannot
 * be opened, or the server cannot be reached
 */
export async function openCliStore(location: StoreLocation, create: boolean): Promise<CliStore> {
  if (location.dialect === 'sqlite') return openSqlite(location, create);
  return location.dialect === 'pg' ? openPg(location, create) : openMysql(location, create);
}

/**
 * Runs `use` on the store at `location` and closes it afterwards, whatever happens, so a server
 * pool never keeps the process alive.
 *
 * @param create - whether a missing store may be created (only `migrate`)
 */
export async function withStore<R>(
  location: StoreLocation,
  create: boolean,
  use: (store: LeasedIdempotencyStore) => Promise<R>,
): Promise<R> {
  const opened = await openCliStore(location, create);
  try {
    return await use(opened.store);
  } finally {
    await opened.close();
  }
}
