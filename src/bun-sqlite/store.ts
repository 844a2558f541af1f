import { AsyncIdempotencyStore } from '../core/async-store.js';
import type { EncryptionOption } from '../core/encryption.js';
import type { LeasedIdempotencyStore } from '../core/store.js';
import { DEFAULT_BATCH_MILLIS } from '../core/validation.js';
import { sqliteQueries } from '../sqlite-dialect/queries.js';
import {
  type SqliteDriver,
  sqliteStatements,
  syncSqliteDriver,
} from '../sqlite-dialect/statements.js';
import type { AnyBunSqliteDatabase, BunSqliteDatabaseLike } from './client.js';
import { keys as defaultKeys, type SqliteKeysTable } from './schema.js';

/** Options of {@link BunSqliteIdempotencyStore}. */
export interface BunSqliteStoreOptions extends EncryptionOption {
  /**
   * Called once by `close()`, e.g. `() => db.$client.close()` to close the database the store owns.
   * By default `close()` leaves it alone: a store built over your database never closes it.
   * `openBunSqliteStore` closes the database it opened.
   */
  readonly onClose?: () => unknown;
  /**
   * The keys table, from `sqliteKeysTable(name)`. Default: the `keys` table. It must exist, made
   * by `applyBunSqliteMigrations(db, { table })` or by your own drizzle-kit migrations.
   */
  readonly table?: SqliteKeysTable;
}

// bun:sqlite runs every statement synchronously, so the store answers settled promises.
function bunDriver(
  client: BunSqliteDatabaseLike,
  onClose: (() => unknown) | undefined,
): SqliteDriver<'sync'> {
  return {
    ...syncSqliteDriver(client),
    checkpoint: () => client.prepare('PRAGMA wal_checkpoint(PASSIVE)').all(),
    close: () => onClose?.(),
  };
}

/**
 * The idempotency store on SQLite under Bun, over a drizzle `bun:sqlite` database
 * (`drizzle-orm/bun-sqlite`). The same table, statements, leases and fencing as the other SQLite
 * stores, so a file made by one opens with another; every operation returns a promise (bun:sqlite
 * itself is synchronous, so the promise is already settled). `acquire` and `releasePending` run
 * their write and their read in one `BEGIN IMMEDIATE` transaction.
 *
 * @typeParam T - the type of the stored responses
 * @example
 * ```ts
 * import { Database } from 'bun:sqlite';
 * import { drizzle } from 'drizzle-orm/bun-sqlite';
 * import { applyBunSqliteMigrations, BunSqliteIdempotencyStore } from 'drizzle-idempotency/bun-sqlite';
 *
 * const db = drizzle({ client: new Database('app.db') });
 * await applyBunSqliteMigrations(db);
 * const store = new BunSqliteIdempotencyStore<{ receipt: number }>(db);
 * ```
 */
export class BunSqliteIdempotencyStore<T = unknown>
  extends AsyncIdempotencyStore<T>
  implements LeasedIdempotencyStore<T>
{
  /** {@inheritDoc IdempotencyStore.sweepBatchMillis} */
  readonly sweepBatchMillis: number = DEFAULT_BATCH_MILLIS;
  readonly #db: AnyBunSqliteDatabase;
  readonly #table: SqliteKeysTable;

  /**
   * @param db - a drizzle database over a bun:sqlite `Database`; the store shares it
   * @param options - see {@link BunSqliteStoreOptions}
   */
  constructor(db: AnyBunSqliteDatabase, options: BunSqliteStoreOptions = {}) {
    const driver = bunDriver(db.$client, options.onClose);
    super(
      sqliteStatements(driver, sqliteQueries(db, options.table ?? defaultKeys)),
      options.encryption,
    );
    this.#db = db;
    this.#table = options.table ?? defaultKeys;
  }

  /** The drizzle database the store runs on. */
  get db(): AnyBunSqliteDatabase {
    return this.#db;
  }

  /** The keys table the store runs on. */
  get table(): SqliteKeysTable {
    return this.#table;
  }
}
