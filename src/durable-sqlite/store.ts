import { AsyncIdempotencyStore } from '../core/async-store.js';
import type { EncryptionOption } from '../core/encryption.js';
import type { LeasedIdempotencyStore } from '../core/store.js';
import { DEFAULT_BATCH_MILLIS } from '../core/validation.js';
import type { SqliteStatement } from '../sqlite-dialect/compile.js';
import { sqliteQueries } from '../sqlite-dialect/queries.js';
import { type SqliteDriver, sqliteStatements } from '../sqlite-dialect/statements.js';
import type { AnyDurableSqliteDatabase, DurableSqliteStorageLike } from './client.js';
import { keys as defaultKeys, type SqliteKeysTable } from './schema.js';

/** Options of {@link DurableSqliteIdempotencyStore}. */
export interface DurableSqliteStoreOptions extends EncryptionOption {
  /**
   * The keys table, from `sqliteKeysTable(name)`. Default: the `keys` table. It must exist, made
   * by `applyDurableSqliteMigrations(db, { table })` or by your own migrations.
   */
  readonly table?: SqliteKeysTable;
}

// Storage calls are synchronous, so each operation runs whole before any other request of the
// Durable Object is served; the write and the read of what it left still run in one transaction,
// so they are one state even when the store is used inside another transaction.
function durableSqliteDriver(storage: DurableSqliteStorageLike): SqliteDriver<'sync'> {
  // Every cursor is read to its end: the statement has run whole before the next one starts.
  const rows = (statement: SqliteStatement): unknown[] =>
    storage.sql.exec(statement.sql, ...statement.args).toArray();
  return {
    read: rows,
    returning: rows,
    // drizzle's run() answers nothing on this driver, and the cursor's rowsWritten counts index
    // writes too: the rows a RETURNING clause answers are exactly the rows the write changed.
    // Every write the store counts ends in its WHERE or conflict clause, where RETURNING goes.
    changes: (statement) =>
      rows({ sql: `${statement.sql} returning 1`, args: statement.args }).length,
    writeThenRead: (write, read) =>
      storage.transactionSync(() => [rows(write), rows(read)] as const),
    // No checkpoint after a sweep batch: the Durable Object manages its own storage.
  };
}

/**
 * The idempotency store in a Cloudflare Durable Object's SQLite storage, over a drizzle database
 * on it (`drizzle(ctx.storage)` from `drizzle-orm/durable-sqlite`). The same table, statements,
 * leases and fencing as the other SQLite stores; every operation returns a promise, already
 * settled, since the storage answers synchronously. `acquire` and `releasePending` run their write
 * and their read in one `transactionSync`.
 *
 * The keys live in the Durable Object, so they are as local as its other state: a key is
 * deduplicated among the requests routed to that object. Build the store once, in the object's
 * constructor (building it sends nothing), with `applyDurableSqliteMigrations(db)` run there under
 * `ctx.blockConcurrencyWhile`. `close()` only stops the store: the storage belongs to the object.
 *
 * @typeParam T - the type of the stored responses
 * @example
 * ```ts
 * import { drizzle } from 'drizzle-orm/durable-sqlite';
 * import {
 *   applyDurableSqliteMigrations,
 *   DurableSqliteIdempotencyStore,
 * } from 'drizzle-idempotency/durable-sqlite';
 *
 * const db = drizzle(ctx.storage);
 * await applyDurableSqliteMigrations(db);
 * const store = new DurableSqliteIdempotencyStore<{ receipt: number }>(db);
 * if (await store.reserve('order-42', fingerprint, now + 86_400)) {
 *   await store.finish('order-42', fingerprint, { receipt: 1 });
 * }
 * await store.fetch('order-42', now); // { receipt: 1 }
 * ```
 */
export class DurableSqliteIdempotencyStore<T = unknown>
  extends AsyncIdempotencyStore<T>
  implements LeasedIdempotencyStore<T>
{
  /** {@inheritDoc IdempotencyStore.sweepBatchMillis} */
  readonly sweepBatchMillis: number = DEFAULT_BATCH_MILLIS;
  readonly #db: AnyDurableSqliteDatabase;
  readonly #table: SqliteKeysTable;

  /**
   * @param db - a drizzle database over a Durable Object's storage; the store runs on it
   * @param options - see {@link DurableSqliteStoreOptions}
   */
  constructor(db: AnyDurableSqliteDatabase, options: DurableSqliteStoreOptions = {}) {
    const table = options.table ?? defaultKeys;
    super(
      sqliteStatements(durableSqliteDriver(db.$client), sqliteQueries(db, table)),
      options.encryption,
    );
    this.#db = db;
    this.#table = table;
  }

  /** The drizzle database the store runs on. */
  get db(): AnyDurableSqliteDatabase {
    return this.#db;
  }

  /** The keys table the store keeps its rows in; `durableSqliteTransaction` records there. */
  get table(): SqliteKeysTable {
    return this.#table;
  }
}
