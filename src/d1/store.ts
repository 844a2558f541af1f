import { AsyncIdempotencyStore, type KeyStatements, type StatsRow } from '../core/async-store.js';
import type { KeyRow } from '../core/record.js';
import type { AcquireOptions, AcquireResult, LeasedIdempotencyStore } from '../core/store.js';
import { compileQueries } from '../libsql/store.js';
import {
  type AnyD1Database,
  type BoundStatement,
  type D1DatabaseLike,
  prepare,
  rowsOf,
} from './client.js';
import { keys as defaultKeys, type SqliteKeysTable } from './schema.js';

/** Options of {@link D1IdempotencyStore}. */
export interface D1StoreOptions {
  /**
   * The keys table, from `sqliteKeysTable(name)`. Default: the `keys` table. It must exist, made
   * by `applyD1Migrations(db, { table })` or by your own migrations.
   */
  readonly table?: SqliteKeysTable;
}

type Queries = ReturnType<typeof compileQueries>;

// The compiled text depends on the table alone, so a store built per request compiles nothing.
const compiled = new WeakMap<SqliteKeysTable, Queries>();

function queriesFor(db: AnyD1Database, table: SqliteKeysTable): Queries {
  let queries = compiled.get(table);
  if (queries === undefined) {
    queries = compileQueries(db, table);
    compiled.set(table, queries);
  }
  return queries;
}

// D1 has no interactive transaction: every operation is one statement, or one `batch` (which D1
// runs as a single transaction) when the write and the read of what it left must see one state.
function d1Statements(client: D1DatabaseLike, queries: Queries): KeyStatements {
  const all = async <Row>(statement: BoundStatement): Promise<Row[]> =>
    rowsOf<Row>(await prepare(client, statement).all());
  const changed = async (statement: BoundStatement): Promise<number> =>
    (await prepare(client, statement).run()).meta.changes ?? 0;
  const batch = (statements: BoundStatement[]) =>
    client.batch(statements.map((statement) => prepare(client, statement)));
  return {
    reserve: (id, fingerprint, expires) =>
      changed(queries.reserve.bind({ id, fingerprint, expires })),
    finish: (id, fingerprint, response) =>
      changed(queries.finish.bind({ id, fingerprint, response })),
    finishFenced: (id, fingerprint, response, attempt) =>
      changed(queries.finishFenced.bind({ id, fingerprint, response, attempt })),
    release: (id, fingerprint) => changed(queries.release.bind({ id, fingerprint })),
    releaseFenced: (id, fingerprint, attempt) =>
      changed(queries.releaseFenced.bind({ id, fingerprint, attempt })),
    renew: (id, fingerprint, attempt, leaseUntil) =>
      changed(queries.renew.bind({ id, fingerprint, attempt, leaseUntil })),
    markUnrecorded: (id, fingerprint, attempt) =>
      changed(queries.markUnrecorded.bind({ id, fingerprint, attempt })),
    acquire: async (id, fingerprint, { expires, now, leaseUntil, token }) => {
      const [won, existing] = await batch([
        queries.acquire.bind({ id, fingerprint, expires, leaseUntil, token, now }),
        queries.get.bind({ id }),
      ]);
      const [owned] = rowsOf<{ attempt: number }>(won);
      if (owned !== undefined) return { attempt: owned.attempt };
      const [row] = rowsOf<KeyRow>(existing);
      if (row === undefined) throw new Error('D1 lost the row acquire conflicted with');
      return { row };
    },
    pendingKeys: ({ now, stale, limit, prefix }) =>
      all<KeyRow>(
        stale
          ? queries.stalePendingKeys.bind({ now, limit, prefix })
          : queries.pendingKeys.bind({ limit, prefix }),
      ),
    releasePending: async (id, fingerprint) => {
      const [deleted, left] = await batch([
        queries.releasePending.bind({ id, fingerprint: fingerprint ?? null }),
        queries.get.bind({ id }),
      ]);
      if (rowsOf(deleted).length === 1) return { released: true };
      return { released: false, row: rowsOf<KeyRow>(left)[0] };
    },
    fetch: async (id, now) => {
      const [row] = await all<{ response: unknown }>(queries.fetch.bind({ id, now }));
      return typeof row?.response === 'string' ? row.response : null;
    },
    get: async (id) => (await all<KeyRow>(queries.get.bind({ id })))[0],
    expired: (now, limit) => all<{ id: string }>(queries.expired.bind({ now, limit })),
    purge: (now, limit) => all<{ id: string }>(queries.purge.bind({ now, limit })),
    // No checkpoint after the batch: D1 manages its own storage and refuses wal_checkpoint.
    sweepBatch: (now, limit) => changed(queries.sweepBatch.bind({ now, limit })),
    counts: () => all<{ status: string; count: number }>(queries.counts.bind({})),
    stats: (now) => all<StatsRow>(queries.stats.bind({ now })),
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
 * nothing is sent to the database), so a Worker may build it per request from its binding. The table must exist:
 * run `applyD1Migrations(db)` (idempotent, a read when up to date) or apply the SQL yourself.
 * `close()` only stops the store: the binding belongs to the Worker.
 *
 * @typeParam T - the type of the stored responses
 * @example
 * ```ts
 * import { drizzle } from 'drizzle-orm/d1';
 * import { applyD1Migrations, D1IdempotencyStore } from 'drizzle-idempotency/d1';
 *
 * export async function handle(env: { DB: D1Database }, digest: string, now: number) {
 *   const db = drizzle(env.DB);
 *   await applyD1Migrations(db);
 *   const store = new D1IdempotencyStore<{ receipt: number }>(db);
 *   if (await store.reserve('order-42', digest, now + 86_400)) {
 *     await store.finish('order-42', digest, { receipt: 1 });
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

  /**
   * @param db - a drizzle database over a D1 binding; the store runs on its binding
   * @param options - see {@link D1StoreOptions}
   */
  constructor(db: AnyD1Database, options: D1StoreOptions = {}) {
    super(d1Statements(db.$client, queriesFor(db, options.table ?? defaultKeys)));
    this.#db = db;
  }

  /** The drizzle database the store runs on. */
  get db(): AnyD1Database {
    return this.#db;
  }

  /**
   * {@inheritDoc LeasedIdempotencyStore.acquire}
   *
   * The insert-or-take-over statement and the read of what is there run in one `batch`, so the
   * row read is the one the statement left.
   */
  override acquire(
    key: string,
    digest: string,
    options: AcquireOptions,
  ): Promise<AcquireResult<T>> {
    return super.acquire(key, digest, options);
  }
}
