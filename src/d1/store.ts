import { AsyncIdempotencyStore } from '../core/async-store.js';
import type { EncryptionOption } from '../core/encryption.js';
import type { LeasedIdempotencyStore } from '../core/store.js';
import type { SqliteStatement } from '../sqlite-dialect/compile.js';
import { sqliteQueries } from '../sqlite-dialect/queries.js';
import { type SqliteDriver, sqliteStatements } from '../sqlite-dialect/statements.js';
import { type AnyD1Database, type D1DatabaseLike, prepare, rowsOf } from './client.js';
import { keys as defaultKeys, type SqliteKeysTable } from './schema.js';

/** Options of {@link D1IdempotencyStore}. */
export interface D1StoreOptions extends EncryptionOption {
  /**
   * The keys table, from `sqliteKeysTable(name)`. Default: the `keys` table. It must exist, made
   * by `applyD1Migrations(db, { table })` or by your own migrations.
   */
  readonly table?: SqliteKeysTable;
}

// D1 has no interactive transaction: every operation is one statement, or one `batch` (which D1
// runs as a single transaction) when the write and the read of what it left must see one state.
// No checkpoint after a sweep: D1 manages its own storage and refuses wal_checkpoint.
function d1Driver(client: D1DatabaseLike): SqliteDriver<'async'> {
  const all = async (statement: SqliteStatement): Promise<unknown[]> =>
    rowsOf(await prepare(client, statement).all());
  return {
    read: all,
    returning: all,
    changes: async (statement) => (await prepare(client, statement).run()).meta.changes ?? 0,
    writeThenRead: async (write, read) => {
      const [written, left] = await client.batch([prepare(client, write), prepare(client, read)]);
      return [rowsOf(written), rowsOf(left)];
    },
  };
}

/**
 * The idempotency store on Cloudflare D1, over a drizzle D1 database (`drizzle(env.DB)` from
 * `drizzle-orm/d1`). Every operation returns a promise and is one statement, or one `batch` of
 * two for `acquire` and `releasePending` (the write and the read of what it left), so nothing
 * needs an interactive transaction, which D1 does not have. Leases and fencing are those of the
 * other SQLite stores: the same table, statements and conditions.
 *
 * Building one is cheap (the statements are compiled to text once per table and isolate, and
 * nothing is sent to the database), so a Worker may build it per request from its binding. The
 * table must exist: run `applyD1Migrations(db)` (idempotent, a read when up to date) or apply the
 * SQL yourself. `close()` only stops the store: the binding belongs to the Worker.
 *
 * @typeParam T - the type of the stored responses
 * @example
 * ```ts
 * import { drizzle } from 'drizzle-orm/d1';
 * import { applyD1Migrations, D1IdempotencyStore } from 'drizzle-idempotency/d1';
 *
 * export async function handle(env: { DB: D1Database }, fingerprint: string, now: number) {
 *   const db = drizzle(env.DB);
 *   await applyD1Migrations(db);
 *   const store = new D1IdempotencyStore<{ receipt: number }>(db);
 *   if (await store.reserve('order-42', fingerprint, now + 86_400)) {
 *     await store.finish('order-42', fingerprint, { receipt: 1 });
 *   }
 *   return store.fetch('order-42', now); // { receipt: 1 }
 * }
 * ```
 */
export class D1IdempotencyStore<T = unknown>
  extends AsyncIdempotencyStore<T>
  implements LeasedIdempotencyStore<T>
{
  readonly #db: AnyD1Database;
  readonly #table: SqliteKeysTable;

  /**
   * @param db - a drizzle database over a D1 binding; the store runs on its binding
   * @param options - see {@link D1StoreOptions}
   */
  constructor(db: AnyD1Database, options: D1StoreOptions = {}) {
    super(
      sqliteStatements(d1Driver(db.$client), sqliteQueries(db, options.table ?? defaultKeys)),
      options.encryption,
    );
    this.#db = db;
    this.#table = options.table ?? defaultKeys;
  }

  /** The drizzle database the store runs on. */
  get db(): AnyD1Database {
    return this.#db;
  }

  /** The keys table the store runs on. */
  get table(): SqliteKeysTable {
    return this.#table;
  }
}
