import { checkedEncryption, type EncryptionOption } from '../core/encryption.js';
import { DatabaseOpenError, IdempotencyError } from '../core/errors.js';
import { assertIntegerOption } from '../core/validation.js';
import type { AnyBunSqliteDatabase } from './client.js';
import { applyBunSqliteMigrations, type BunSqliteMigrationOptions } from './migrate.js';
import { BunSqliteIdempotencyStore } from './store.js';

/** Options of {@link openBunSqliteStore}. */
export interface OpenBunSqliteStoreOptions extends BunSqliteMigrationOptions, EncryptionOption {
  /**
   * How long a write waits for another connection's write lock before failing, in milliseconds.
   * Default 5000.
   */
  readonly busyTimeoutMs?: number;
}

/**
 * Opens (creating if needed) a SQLite file through Bun's built-in `bun:sqlite` as an idempotency
 * store: a busy timeout, WAL journal, then the migrations. `close()` closes the database. Only
 * under Bun: elsewhere `bun:sqlite` does not exist and this rejects with a
 * {@link DatabaseOpenError}.
 *
 * @param path - the database file, e.g. `./idempotency.db`
 * @param options - see {@link OpenBunSqliteStoreOptions}
 * @typeParam T - the type of the stored responses
 * @example
 * ```ts
 * import { openBunSqliteStore } from 'drizzle-idempotency/bun-sqlite';
 *
 * const store = await openBunSqliteStore<{ receipt: number }>('./idempotency.db');
 * ```
 * @throws {@link DatabaseOpenError} for an empty path, outside Bun, or a file that cannot be
 * opened as a database
 * @throws {@link SchemaMismatchError} when a foreign `keys` table is in the way
 */
export async function openBunSqliteStore<T = unknown>(
  path: string,
  options: OpenBunSqliteStoreOptions = {},
): Promise<BunSqliteIdempotencyStore<T>> {
  const encryption = checkedEncryption(options);
  const busyTimeoutMs = options.busyTimeoutMs ?? 5000;
  assertIntegerOption(busyTimeoutMs, 'busyTimeoutMs', 0, 2 ** 31 - 1);
  if (typeof path !== 'string' || path.length === 0) {
    throw new DatabaseOpenError('the database path must be a non-empty string');
  }
  const table = options.table === undefined ? {} : { table: options.table };
  // Loaded here, so that importing this entry never needs Bun: drizzle's adapter imports
  // bun:sqlite.
  let db: AnyBunSqliteDatabase;
  try {
    const { drizzle } = await import('drizzle-orm/bun-sqlite');
    db = drizzle({ connection: path }) as unknown as AnyBunSqliteDatabase;
  } catch (error) {
    throw new DatabaseOpenError(`cannot open ${path}: ${(error as Error).message}`, error);
  }
  const client = db.$client;
  try {
    client.prepare(`PRAGMA busy_timeout = ${busyTimeoutMs}`).all();
    // Read before writing anything: this is where a file that is not a database fails.
    client.prepare('SELECT count(*) FROM sqlite_master').all();
    await applyBunSqliteMigrations(db, table);
    client.prepare('PRAGMA journal_mode = WAL').all();
    return new BunSqliteIdempotencyStore<T>(db, {
      onClose: () => client.close(),
      ...table,
      ...encryption,
    });
  } catch (error) {
    client.close();
    if (error instanceof IdempotencyError) throw error;
    throw new DatabaseOpenError(`cannot open ${path}: ${(error as Error).message}`, error);
  }
}
