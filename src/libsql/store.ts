import type { Client, InStatement, ResultSet } from '@libsql/client';
import type { LibSQLDatabase } from 'drizzle-orm/libsql';
import { AsyncIdempotencyStore } from '../core/async-store.js';
import { drizzleClientOf } from '../core/database-identity.js';
import type { EncryptionOption } from '../core/encryption.js';
import { UnrecognisedDatabaseError } from '../core/errors.js';
import type { LeasedIdempotencyStore } from '../core/store.js';
import type { SqliteStatement } from '../sqlite-dialect/compile.js';
import { sqliteQueries } from '../sqlite-dialect/queries.js';
import { type SqliteDriver, sqliteStatements } from '../sqlite-dialect/statements.js';
import { keys as defaultKeys, type SqliteKeysTable } from './schema.js';
import { writeQueue } from './write-queue.js';

/** Any drizzle database over a libSQL client, whatever schema it was built with. */
// biome-ignore lint/suspicious/noExplicitAny: the store uses its own table, never the app's schema
export type AnyLibsqlDatabase = LibSQLDatabase<any> & { $client: Client };

/** Options of {@link LibsqlIdempotencyStore}. */
export interface LibsqlStoreOptions extends EncryptionOption {
  /**
   * Called once by `close()`, e.g. `() => db.$client.close()` to close the libSQL client the store
   * owns. By default `close()` leaves it alone: a store built over your database never closes it.
   * `openLibsqlStore` closes the client it opened.
   */
  readonly onClose?: () => unknown;
  /**
   * The keys table, from `sqliteKeysTable(name)`. Default: the `keys` table. It must exist, made
   * by `applyLibsqlMigrations(db, { table })` or by your own drizzle-kit migrations.
   */
  readonly table?: SqliteKeysTable;
}

// Every write runs as a `write` batch, so it takes the write lock before it reads; two statements
// in one batch see the same row, with no other writer in between. Every batch waits its turn in the
// client's write queue, behind any open transaction of `libsqlTransaction` on the same client.
function libsqlDriver(client: Client, onClose: (() => unknown) | undefined): SqliteDriver<'async'> {
  const queued = writeQueue(client);
  const writeBatch = (statements: SqliteStatement[]): Promise<ResultSet[]> =>
    queued(() => client.batch(statements as InStatement[], 'write'));
  const write = async (statement: SqliteStatement): Promise<ResultSet> => {
    const [result] = await writeBatch([statement]);
    if (result === undefined) throw new Error('libSQL returned no result for a batch of one');
    return result;
  };
  return {
    read: async (statement) => rowsOf(await client.execute(statement as InStatement)),
    returning: async (statement) => rowsOf(await write(statement)),
    changes: async (statement) => (await write(statement)).rowsAffected,
    writeThenRead: async (first, then) => {
      const [written, read] = await writeBatch([first, then]);
      return [rowsOf(written), rowsOf(read)];
    },
    // A remote server owns its WAL (Turso refuses the PRAGMA): only a local file is checkpointed.
    ...(client.protocol === 'file'
      ? { checkpoint: () => client.execute('PRAGMA wal_checkpoint(PASSIVE)') }
      : {}),
    // Behind every write queued on the client, a transaction of `libsqlTransaction` included:
    // closing the client under one would lose its commit.
    close: () => queued(async () => onClose?.()),
  };
}

// libSQL rows are arrays that also carry each column under its name; a copy gives plain objects.
function rowsOf(result: ResultSet | undefined): unknown[] {
  return result === undefined ? [] : result.rows.map((row) => ({ ...row }));
}

/** Refuses anything but a drizzle database over a libSQL client (`execute`, `batch`, `close`). */
function assertLibsqlClient(db: unknown): void {
  const client = drizzleClientOf(db, 'libsql') as Partial<Client> | null;
  if (
    typeof client !== 'object' ||
    client === null ||
    typeof client.execute !== 'function' ||
    typeof client.batch !== 'function' ||
    typeof client.close !== 'function'
  ) {
    throw new UnrecognisedDatabaseError(
      'the drizzle database does not run on a libSQL client; make it with drizzle({ client: createClient({ url }) }) from drizzle-orm/libsql',
    );
  }
}

/**
 * The idempotency store on SQLite through libSQL (`@libsql/client`), over a drizzle libSQL
 * database. Every operation returns a promise. The table must exist: use `openLibsqlStore`, or
 * `applyLibsqlMigrations`, or your own drizzle-kit migrations with the exported `keys` table (or
 * one built by `sqliteKeysTable(name)`, given as `{ table }`).
 *
 * Every write runs as one `write` batch (`BEGIN IMMEDIATE`) of one statement, or of two for
 * `acquire` and `releasePending` (the write and the read of what it left): it takes the write lock
 * before it reads, so it waits for another process's writer (up to the client's busy timeout)
 * instead of failing. The store never keeps a
 * transaction open across an `await`: libSQL's local client waits for a lock synchronously, so a
 * transaction left open while the event loop ran another operation on a second connection of the
 * same client would block the process until the busy timeout. For the same reason the writes of
 * every store and every `libsqlTransaction` over one client take turns in one queue: a write that
 * comes while a transaction of this process holds the write lock waits for it to end, as a promise,
 * instead of blocking the event loop on the lock.
 *
 * @typeParam T - the type of the stored responses
 * @example
 * ```ts
 * import { createClient } from '@libsql/client';
 * import { drizzle } from 'drizzle-orm/libsql';
 * import { applyLibsqlMigrations, LibsqlIdempotencyStore } from 'drizzle-idempotency/libsql';
 *
 * const db = drizzle({ client: createClient({ url: 'file:app.db', timeout: 5000 }) });
 * await applyLibsqlMigrations(db);
 * const store = new LibsqlIdempotencyStore<{ receipt: number }>(db);
 * if (await store.reserve('order-42', fingerprint, now + 86_400)) {
 *   await store.finish('order-42', fingerprint, { receipt: 1 });
 * }
 * await store.fetch('order-42', now); // { receipt: 1 }
 * ```
 */
export class LibsqlIdempotencyStore<T = unknown>
  extends AsyncIdempotencyStore<T>
  implements LeasedIdempotencyStore<T>
{
  readonly #db: AnyLibsqlDatabase;
  readonly #table: SqliteKeysTable;

  /**
   * @param db - a drizzle database over a libSQL client; the store shares its client
   * @param options - see {@link LibsqlStoreOptions}
   * @throws {@link UnrecognisedDatabaseError} when `db` is not a drizzle database over a libSQL
   * client
   */
  constructor(db: AnyLibsqlDatabase, options: LibsqlStoreOptions = {}) {
    assertLibsqlClient(db);
    const table = options.table ?? defaultKeys;
    const driver = libsqlDriver(db.$client, options.onClose);
    super(sqliteStatements(driver, sqliteQueries(db, table)), options.encryption);
    this.#db = db;
    this.#table = table;
  }

  /** The drizzle database the store runs on; use it to run your own queries on the same client. */
  get db(): AnyLibsqlDatabase {
    return this.#db;
  }

  /** The keys table the store keeps its rows in; `libsqlTransaction` records there. */
  get table(): SqliteKeysTable {
    return this.#table;
  }

  /**
   * {@inheritDoc IdempotencyStore.purge}
   *
   * One statement in one `write` transaction: the candidates are selected in id order and deleted
   * with the predicate repeated; only the ids actually deleted are returned, still ascending.
   */
  override purge(now: number, limit?: number): Promise<string[]> {
    return super.purge(now, limit);
  }
}
