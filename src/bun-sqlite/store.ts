import type { InValue } from '@libsql/client';
import { AsyncIdempotencyStore, type KeyStatements, type StatsRow } from '../core/async-store.js';
import { closeHook } from '../core/close-option.js';
import type { KeyRow } from '../core/record.js';
import type { LeasedIdempotencyStore } from '../core/store.js';
import type { LibsqlStatement } from '../libsql/compile.js';
import { compileQueries } from '../libsql/store.js';
import type {
  AnyBunSqliteDatabase,
  BunSqliteDatabaseLike,
  BunSqliteStatementLike,
} from './client.js';
import { keys as defaultKeys, type SqliteKeysTable } from './schema.js';

/** Options of {@link BunSqliteIdempotencyStore}. */
export interface BunSqliteStoreOptions {
  /**
   * Called once by `close()`, e.g. `() => db.$client.close()` to close the database the store owns.
   * By default `close()` leaves it alone: a store built over your database never closes it.
   * `openBunSqliteStore` closes the database it opened.
   */
  readonly onClose?: () => unknown;
  /**
   * `true` closes the database on `close()`.
   *
   * @deprecated Use `onClose: () => db.$client.close()`, the close option of every store. Removed
   * in 1.0.
   */
  readonly closeConnection?: boolean;
  /**
   * The keys table, from `sqliteKeysTable(name)`. Default: the `keys` table. It must exist, made
   * by `applyBunSqliteMigrations(db, { table })` or by your own drizzle-kit migrations.
   */
  readonly table?: SqliteKeysTable;
}

type Compiled = ReturnType<typeof compileQueries>;

// bun:sqlite runs every statement synchronously, so the store prepares each once and answers
// settled promises. The two-statement operations run in one IMMEDIATE transaction: the write and
// the read of what it left see one state, whatever another process does.
function bunStatements(
  client: BunSqliteDatabaseLike,
  queries: Compiled,
  onClose: (() => unknown) | undefined,
): KeyStatements {
  const prepared = new Map<string, BunSqliteStatementLike>();
  const on = (sql: string) => {
    let statement = prepared.get(sql);
    if (statement === undefined) {
      statement = client.prepare(sql);
      prepared.set(sql, statement);
    }
    return statement;
  };
  // Rows as bun:sqlite gives them: plain objects, typed by the caller.
  const all = <N extends string>(
    query: LibsqlStatement<N>,
    values: Readonly<Record<N, InValue>>,
  ): unknown[] => on(query.sql).all(...query.bind(values).args);
  const write = <N extends string>(
    query: LibsqlStatement<N>,
    values: Readonly<Record<N, InValue>>,
  ): number => on(query.sql).run(...query.bind(values).args).changes;
  const changed = async <N extends string>(
    query: LibsqlStatement<N>,
    values: Readonly<Record<N, InValue>>,
  ): Promise<number> => write(query, values);
  const acquire = client.transaction(
    (
      id: string,
      fingerprint: string,
      expires: number,
      leaseUntil: number,
      token: number,
      now: number,
    ) => {
      const [owned] = all(queries.acquire, {
        id,
        fingerprint,
        expires,
        leaseUntil,
        token,
        now,
      }) as { attempt: number }[];
      if (owned !== undefined) return { attempt: owned.attempt };
      const [row] = all(queries.get, { id }) as KeyRow[];
      if (row === undefined) throw new Error('bun:sqlite lost the row acquire conflicted with');
      return { row };
    },
  );
  const releasePending = client.transaction((id: string, fingerprint: string | null) => {
    const deleted = all(queries.releasePending, { id, fingerprint });
    if (deleted.length === 1) return { released: true as const };
    const [row] = all(queries.get, { id }) as KeyRow[];
    return { released: false as const, row };
  });
  return {
    reserve: (id, fingerprint, expires) => changed(queries.reserve, { id, fingerprint, expires }),
    finish: (id, fingerprint, response) => changed(queries.finish, { id, fingerprint, response }),
    finishFenced: (id, fingerprint, response, attempt) =>
      changed(queries.finishFenced, { id, fingerprint, response, attempt }),
    release: (id, fingerprint) => changed(queries.release, { id, fingerprint }),
    releaseFenced: (id, fingerprint, attempt) =>
      changed(queries.releaseFenced, { id, fingerprint, attempt }),
    renew: (id, fingerprint, attempt, leaseUntil) =>
      changed(queries.renew, { id, fingerprint, attempt, leaseUntil }),
    markUnrecorded: (id, fingerprint, attempt) =>
      changed(queries.markUnrecorded, { id, fingerprint, attempt }),
    acquire: async (id, fingerprint, { expires, now, leaseUntil, token }) =>
      acquire.immediate(id, fingerprint, expires, leaseUntil, token, now),
    pendingKeys: async ({ now, stale, limit, prefix }) =>
      stale
        ? (all(queries.stalePendingKeys, { now, limit, prefix }) as KeyRow[])
        : (all(queries.pendingKeys, { limit, prefix }) as KeyRow[]),
    releasePending: async (id, fingerprint) => releasePending.immediate(id, fingerprint ?? null),
    fetch: async (id, now) => {
      const [row] = all(queries.fetch, { id, now }) as { response: unknown }[];
      return typeof row?.response === 'string' ? row.response : null;
    },
    get: async (id) => (all(queries.get, { id }) as KeyRow[])[0],
    expired: async (now, limit) => all(queries.expired, { now, limit }) as { id: string }[],
    purge: async (now, limit) => all(queries.purge, { now, limit }) as { id: string }[],
    sweepBatch: async (now, limit) => {
      const deleted = write(queries.sweepBatch, { now, limit });
      // As on the other SQLite stores: the sweeper, not a request's commit, copies the WAL back.
      if (deleted > 0) client.prepare('PRAGMA wal_checkpoint(PASSIVE)').all();
      return deleted;
    },
    counts: async () => all(queries.counts, {}) as { status: string; count: number }[],
    stats: async (now) => all(queries.stats, { now }) as StatsRow[],
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
 * const db = drizzle(new Database('app.db'));
 * await applyBunSqliteMigrations(db);
 * const store = new BunSqliteIdempotencyStore<{ receipt: number }>(db);
 * ```
 */
export class BunSqliteIdempotencyStore<T = unknown>
  extends AsyncIdempotencyStore<T>
  implements LeasedIdempotencyStore<T>
{
  readonly #db: AnyBunSqliteDatabase;

  /**
   * @param db - a drizzle database over a bun:sqlite `Database`; the store shares it
   * @param options - see {@link BunSqliteStoreOptions}
   */
  constructor(db: AnyBunSqliteDatabase, options: BunSqliteStoreOptions = {}) {
    const queries = compileQueries(db, options.table ?? defaultKeys);
    super(bunStatements(db.$client, queries, closeHook(db.$client, options)));
    this.#db = db;
  }

  /** The drizzle database the store runs on. */
  get db(): AnyBunSqliteDatabase {
    return this.#db;
  }
}
