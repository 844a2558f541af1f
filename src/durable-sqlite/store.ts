import { AsyncIdempotencyStore, type KeyStatements, type StatsRow } from '../core/async-store.js';
import type { KeyRow } from '../core/record.js';
import type { LeasedIdempotencyStore } from '../core/store.js';
import { compileQueries } from '../libsql/store.js';
import type { AnyDurableSqliteDatabase, DurableSqliteStorageLike } from './client.js';
import { keys as defaultKeys, type SqliteKeysTable } from './schema.js';

/** Options of {@link DurableSqliteIdempotencyStore}. */
export interface DurableSqliteStoreOptions {
  /**
   * The keys table, from `sqliteKeysTable(name)`. Default: the `keys` table. It must exist, made
   * by `applyDurableSqliteMigrations(db, { table })` or by your own migrations.
   */
  readonly table?: SqliteKeysTable;
}

type Queries = ReturnType<typeof compileQueries>;

interface Bound {
  readonly sql: string;
  readonly args: readonly unknown[];
}

/** How the statements run on a Durable Object's storage: the part of the store that is this driver's own. */
interface DurableSqliteDriver {
  /** Runs a statement; its rows as plain objects. */
  rows<Row>(statement: Bound): Row[];
  /** Runs a write; the number of rows it changed. */
  changed(statement: Bound): number;
  /** Runs `body` as one transaction, so its statements see one state. */
  atomically<R>(body: () => R): R;
}

function durableSqliteDriver(storage: DurableSqliteStorageLike): DurableSqliteDriver {
  // Every cursor is read to its end: the statement has run whole before the next one starts.
  const rows = <Row>(statement: Bound): Row[] =>
    storage.sql.exec(statement.sql, ...statement.args).toArray() as Row[];
  return {
    rows,
    // drizzle's run() answers nothing on this driver, and the cursor's rowsWritten counts index
    // writes too: the rows a RETURNING clause answers are exactly the rows the write changed.
    // Every write the store counts ends in its WHERE or conflict clause, where RETURNING goes.
    changed: (statement) =>
      rows({ sql: `${statement.sql} returning 1`, args: statement.args }).length,
    atomically: (body) => storage.transactionSync(body),
  };
}

// Storage calls are synchronous, so each operation runs whole before any other request of the
// Durable Object is served; the two-statement operations still run in one transaction, so the
// write and the read of what it left are one state even when the store is used inside another
// transaction.
function durableSqliteStatements(driver: DurableSqliteDriver, queries: Queries): KeyStatements {
  const { rows, changed, atomically } = driver;
  return {
    reserve: async (id, fingerprint, expires) =>
      changed(queries.reserve.bind({ id, fingerprint, expires })),
    finish: async (id, fingerprint, response) =>
      changed(queries.finish.bind({ id, fingerprint, response })),
    finishFenced: async (id, fingerprint, response, attempt) =>
      changed(queries.finishFenced.bind({ id, fingerprint, response, attempt })),
    release: async (id, fingerprint) => changed(queries.release.bind({ id, fingerprint })),
    releaseFenced: async (id, fingerprint, attempt) =>
      changed(queries.releaseFenced.bind({ id, fingerprint, attempt })),
    renew: async (id, fingerprint, attempt, leaseUntil) =>
      changed(queries.renew.bind({ id, fingerprint, attempt, leaseUntil })),
    markUnrecorded: async (id, fingerprint, attempt) =>
      changed(queries.markUnrecorded.bind({ id, fingerprint, attempt })),
    acquire: async (id, fingerprint, { expires, now, leaseUntil, token }) =>
      atomically(() => {
        const [owned] = rows<{ attempt: number }>(
          queries.acquire.bind({ id, fingerprint, expires, leaseUntil, token, now }),
        );
        if (owned !== undefined) return { attempt: owned.attempt };
        const [row] = rows<KeyRow>(queries.get.bind({ id }));
        if (row === undefined)
          throw new Error('the Durable Object lost the row acquire conflicted with');
        return { row };
      }),
    pendingKeys: async ({ now, stale, limit, prefix }) =>
      rows<KeyRow>(
        stale
          ? queries.stalePendingKeys.bind({ now, limit, prefix })
          : queries.pendingKeys.bind({ limit, prefix }),
      ),
    releasePending: async (id, fingerprint) =>
      atomically(() => {
        const deleted = rows(queries.releasePending.bind({ id, fingerprint: fingerprint ?? null }));
        if (deleted.length === 1) return { released: true as const };
        return { released: false as const, row: rows<KeyRow>(queries.get.bind({ id }))[0] };
      }),
    fetch: async (id, now) => {
      const [row] = rows<{ response: unknown }>(queries.fetch.bind({ id, now }));
      return typeof row?.response === 'string' ? row.response : null;
    },
    get: async (id) => rows<KeyRow>(queries.get.bind({ id }))[0],
    expired: async (now, limit) => rows<{ id: string }>(queries.expired.bind({ now, limit })),
    purge: async (now, limit) => rows<{ id: string }>(queries.purge.bind({ now, limit })),
    // No checkpoint after the batch: the Durable Object manages its own storage.
    sweepBatch: async (now, limit) => changed(queries.sweepBatch.bind({ now, limit })),
    counts: async () => rows<{ status: string; count: number }>(queries.counts.bind({})),
    stats: async (now) => rows<StatsRow>(queries.stats.bind({ now })),
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
 * if (await store.reserve('order-42', digest, now + 86_400)) {
 *   await store.finish('order-42', digest, { receipt: 1 });
 * }
 * await store.fetch('order-42', now); // { receipt: 1 }
 * ```
 */
export class DurableSqliteIdempotencyStore<T = unknown>
  extends AsyncIdempotencyStore<T>
  implements LeasedIdempotencyStore<T>
{
  readonly #db: AnyDurableSqliteDatabase;
  readonly #table: SqliteKeysTable;

  /**
   * @param db - a drizzle database over a Durable Object's storage; the store runs on it
   * @param options - see {@link DurableSqliteStoreOptions}
   */
  constructor(db: AnyDurableSqliteDatabase, options: DurableSqliteStoreOptions = {}) {
    const table = options.table ?? defaultKeys;
    super(durableSqliteStatements(durableSqliteDriver(db.$client), compileQueries(db, table)));
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
