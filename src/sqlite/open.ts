import { accessSync, constants, existsSync, statSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import Database from 'better-sqlite3';
import { drizzle } from 'drizzle-orm/better-sqlite3';
import { assertBackedBy } from '../core/database-identity.js';
import { type DeploymentWarningOptions, enforceDeployment } from '../core/deployment.js';
import { checkedEncryption, type EncryptionOption } from '../core/encryption.js';
import { DatabaseOpenError, InvalidOptionError } from '../core/errors.js';
import { assertIntegerOption } from '../core/validation.js';
import type { SqliteMigrationOptions } from '../sqlite-dialect/migrate.js';
import { checkSqliteDeployment } from './deployment.js';
import {
  applySqliteMigrations,
  assertAdoptableBookkeeping,
  assertAdoptableSqliteKeysTable,
} from './migrate.js';
import {
  type AnyBetterSqliteDatabase,
  MAX_ANSWER_CACHE_SIZE,
  SqliteIdempotencyStore,
} from './store.js';

/** SQLite's `synchronous` levels. */
export type SqliteSynchronous = 'OFF' | 'NORMAL' | 'FULL' | 'EXTRA';

const SYNCHRONOUS_LEVELS: readonly SqliteSynchronous[] = ['OFF', 'NORMAL', 'FULL', 'EXTRA'];

/** Options of {@link openSqliteStore}. */
export interface OpenSqliteStoreOptions
  extends SqliteMigrationOptions,
    DeploymentWarningOptions,
    EncryptionOption {
  /**
   * How long a write waits for another connection's write lock before failing, in milliseconds.
   * Default 5000.
   */
  readonly busyTimeoutMs?: number;
  /**
   * SQLite's `synchronous` pragma. Default `'NORMAL'`: with WAL, a committed write survives the
   * process crashing, but a power loss or OS crash may roll back the last few commits. Use
   * `'FULL'` when a stored answer must survive a power loss, at the cost of an fsync per commit.
   */
  readonly synchronous?: SqliteSynchronous;
  /**
   * How many stored answers `fetch` keeps in memory, so replays skip the database. Default 0: no
   * cache. See `SqliteStoreOptions.answerCacheSize`.
   */
  readonly answerCacheSize?: number;
}

function isSqliteError(error: unknown, code: string): boolean {
  return error instanceof Error && (error as { code?: unknown }).code === code;
}

function assertOpenablePath(path: unknown): asserts path is string {
  if (typeof path !== 'string' || path.length === 0) {
    throw new DatabaseOpenError('the database path must be a non-empty string');
  }
  if (path === ':memory:' || path.startsWith('file:')) return;
  const directory = dirname(resolve(path));
  if (!existsSync(directory) || !statSync(directory).isDirectory()) {
    throw new DatabaseOpenError(`cannot open ${path}: the directory ${directory} does not exist`);
  }
  if (!existsSync(path)) return;
  if (statSync(path).isDirectory()) {
    throw new DatabaseOpenError(`cannot open ${path}: it is a directory, not a database file`);
  }
  // SQLite opens a file it cannot write read-only without a word, and the first reserve would
  // then fail with a raw SQLITE_READONLY. access() also sees what the mode bits do not stop
  // root from writing: an immutable file (chattr +i) or a read-only mount.
  try {
    accessSync(path, constants.W_OK);
  } catch (error) {
    throw new DatabaseOpenError(`cannot open ${path} for writing: the file is read-only`, error);
  }
}

/**
 * Opens (creating if needed) a SQLite file the way every SQLite entry point does: the path and
 * options checked first, WAL journal, a busy timeout, the chosen `synchronous` level, the
 * deployment check, then `migrate` on the open database. Nothing is written to a file that turns
 * out not to be a SQLite database, or whose keys table is not the contract's. The caller owns the
 * connection it answers; on any failure it is closed and the error named.
 *
 * @param path - the database file, or `:memory:`
 * @param options - see {@link OpenSqliteStoreOptions} (the answer cache is the store's)
 * @param migrate - brings the file's tables up to date
 * @throws {@link DatabaseOpenError} for a missing directory, a directory, a file that is not a
 * database, or a file that cannot be opened
 * @throws {@link SchemaMismatchError} when a foreign `keys` table is in the way
 */
export function openSqliteDatabase(
  path: string,
  options: Omit<OpenSqliteStoreOptions, 'answerCacheSize'>,
  migrate: (db: AnyBetterSqliteDatabase) => void,
): AnyBetterSqliteDatabase {
  const busyTimeoutMs = options.busyTimeoutMs ?? 5000;
  assertIntegerOption(busyTimeoutMs, 'busyTimeoutMs', 0, 2 ** 31 - 1);
  const synchronous = options.synchronous ?? 'NORMAL';
  if (!SYNCHRONOUS_LEVELS.includes(synchronous)) {
    throw new InvalidOptionError(
      `synchronous must be one of ${SYNCHRONOUS_LEVELS.join(', ')}, got ${String(synchronous)}`,
    );
  }
  const table = options.table === undefined ? {} : { table: options.table };
  assertOpenablePath(path);

  let client: Database.Database;
  try {
    client = new Database(path, { timeout: busyTimeoutMs });
  } catch (error) {
    throw new DatabaseOpenError(`cannot open ${path}: ${(error as Error).message}`, error);
  }
  try {
    const db = drizzle({ client });
    assertBackedBy(db, client, 'better-sqlite3');
    // Read before writing anything: this is where a file that is not a database fails.
    client.prepare('SELECT count(*) FROM sqlite_master').get();
    assertAdoptableSqliteKeysTable(client, table);
    assertAdoptableBookkeeping(client, table);
    client.pragma('journal_mode = WAL');
    client.pragma(`synchronous = ${synchronous}`);
    enforceDeployment(checkSqliteDeployment(client), options);
    migrate(db);
    return db;
  } catch (error) {
    client.close();
    if (isSqliteError(error, 'SQLITE_CORRUPT')) {
      throw new DatabaseOpenError(`cannot open ${path}: the database file is damaged`, error);
    }
    if (isSqliteError(error, 'SQLITE_NOTADB')) {
      throw new DatabaseOpenError(`cannot open ${path}: the file is not a SQLite database`, error);
    }
    if (isSqliteError(error, 'SQLITE_READONLY') || isSqliteError(error, 'SQLITE_CANTOPEN')) {
      throw new DatabaseOpenError(
        `cannot open ${path} for writing: ${(error as Error).message}`,
        error,
      );
    }
    throw error;
  }
}

/**
 * Opens (creating if needed) a SQLite file as an idempotency store: WAL journal, a busy timeout,
 * the chosen `synchronous` level, the deployment check (see `checkSqliteDeployment`: its warnings
 * go to `onDeploymentWarning`), then the migrations. `close()` closes the connection.
 *
 * Nothing is written to a file that turns out not to be a SQLite database, or whose keys table
 * is not the contract's. `options.table` names another keys table (see `sqliteKeysTable`).
 *
 * @param path - the database file, or `:memory:`
 * @param options - see {@link OpenSqliteStoreOptions}
 * @typeParam T - the type of the stored responses
 * @example
 * ```ts
 * const store = openSqliteStore<{ receipt: number }>('./idempotency.db');
 * try {
 *   store.reserve('order-42', fingerprint, now + 86_400);
 * } finally {
 *   store.close();
 * }
 * ```
 * @throws {@link DatabaseOpenError} for a missing directory, a directory, a file that is not a
 * database, or a file that cannot be opened
 * @throws {@link SchemaMismatchError} when a foreign `keys` table is in the way
 */
export function openSqliteStore<T = unknown>(
  path: string,
  options: OpenSqliteStoreOptions = {},
): SqliteIdempotencyStore<T> {
  const encryption = checkedEncryption(options);
  const answerCacheSize = options.answerCacheSize ?? 0;
  // Checked here too, so a bad value is refused before a file is created.
  assertIntegerOption(answerCacheSize, 'answerCacheSize', 0, MAX_ANSWER_CACHE_SIZE);
  const table = options.table === undefined ? {} : { table: options.table };
  const db = openSqliteDatabase(path, options, (opened) => applySqliteMigrations(opened, table));
  try {
    return new SqliteIdempotencyStore<T>(db, {
      onClose: () => db.$client.close(),
      answerCacheSize,
      ...table,
      ...encryption,
    });
  } catch (error) {
    db.$client.close();
    throw error;
  }
}
