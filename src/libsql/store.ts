import type { Client, InStatement, ResultSet } from '@libsql/client';
import { and, asc, eq, gt, inArray, isNull, lte, or, sql } from 'drizzle-orm';
import type { LibSQLDatabase } from 'drizzle-orm/libsql';
import type { BaseSQLiteDatabase } from 'drizzle-orm/sqlite-core';
import { AsyncIdempotencyStore, type KeyStatements, type StatsRow } from '../core/async-store.js';
import {
  expiredAnswer,
  idStartsWith,
  leaseHolderRow,
  leaseTakeover,
  ownerRow,
} from '../core/key-conditions.js';
import type { KeyRow } from '../core/record.js';
import { KeyStatus } from '../core/status.js';
import type { AcquireOptions, AcquireResult, LeasedIdempotencyStore } from '../core/store.js';
import { compileLibsqlStatement } from './compile.js';
import { keys as defaultKeys, type SqliteKeysTable } from './schema.js';
import { writeQueue } from './write-queue.js';

/** Any drizzle database over a libSQL client, whatever schema it was built with. */
// biome-ignore lint/suspicious/noExplicitAny: the store only uses its own table, never the user's schema
export type AnyLibsqlDatabase = LibSQLDatabase<any> & { $client: Client };

/** Options of {@link LibsqlIdempotencyStore}. */
export interface LibsqlStoreOptions {
  /**
   * Whether `close()` also closes the libSQL client. Default `false`: a store built over your
   * database leaves your client open. `openLibsqlStore` sets it to `true`.
   */
  readonly closeConnection?: boolean;
  /**
   * The keys table, from `sqliteKeysTable(name)`. Default: the `keys` table. It must exist, made
   * by `applyLibsqlMigrations(db, { table })` or by your own drizzle-kit migrations.
   */
  readonly table?: SqliteKeysTable;
}

const p = sql.placeholder;

/**
 * The statements of the asynchronous SQLite stores, compiled once over any drizzle SQLite
 * database (drizzle writes the same SQL for libSQL, D1 and bun:sqlite); the D1 and bun:sqlite
 * stores run them too.
 */
export function compileQueries(
  // biome-ignore lint/suspicious/noExplicitAny: only the builders are used, never the schema
  db: BaseSQLiteDatabase<'sync' | 'async', unknown, any>,
  keys: SqliteKeysTable,
) {
  const isExpiredAnswer = expiredAnswer(keys, p('now'));
  const ownPending = ownerRow(keys, p('id'), p('fingerprint'));
  const ownedBy = leaseHolderRow(keys, p('id'), p('fingerprint'), p('attempt'));
  const isPending = eq(keys.status, KeyStatus.pending);
  const pendingRows = (where: ReturnType<typeof and>) =>
    db.select().from(keys).where(where).orderBy(asc(keys.id)).limit(p('limit'));
  const expiredIds = (order: ReturnType<typeof asc>[]) =>
    db
      .select({ id: keys.id })
      .from(keys)
      .where(isExpiredAnswer)
      .orderBy(...order)
      .limit(p('limit'));
  return {
    reserve: compileLibsqlStatement(
      db
        .insert(keys)
        .values({
          id: p('id'),
          fingerprint: p('fingerprint'),
          status: KeyStatus.pending,
          expires: p('expires'),
        })
        .onConflictDoNothing(),
      ['id', 'fingerprint', 'expires'],
    ),
    // One statement: inserts a missing key with a fresh fencing token, or takes over a pending row
    // of the same fingerprint whose lease lapsed, raising its token; returns no row otherwise. A
    // row without a lease (NULL) never compares as lapsed.
    acquire: compileLibsqlStatement(
      db
        .insert(keys)
        .values({
          id: p('id'),
          fingerprint: p('fingerprint'),
          status: KeyStatus.pending,
          expires: p('expires'),
          leaseUntil: p('leaseUntil'),
          attempt: p('token'),
        })
        .onConflictDoUpdate({ target: keys.id, ...leaseTakeover(keys, p('now')) })
        .returning({ attempt: keys.attempt }),
      ['id', 'fingerprint', 'expires', 'leaseUntil', 'token', 'now'],
    ),
    finish: compileLibsqlStatement(
      db
        .update(keys)
        .set({ status: KeyStatus.done, response: sql<string>`${p('response')}` })
        .where(ownPending),
      ['id', 'fingerprint', 'response'],
    ),
    finishFenced: compileLibsqlStatement(
      db
        .update(keys)
        .set({ status: KeyStatus.done, response: sql<string>`${p('response')}` })
        .where(ownerRow(keys, p('id'), p('fingerprint'), p('attempt'))),
      ['id', 'fingerprint', 'response', 'attempt'],
    ),
    renew: compileLibsqlStatement(
      db
        .update(keys)
        .set({ leaseUntil: sql<number>`${p('leaseUntil')}` })
        .where(ownedBy),
      ['id', 'fingerprint', 'attempt', 'leaseUntil'],
    ),
    releaseFenced: compileLibsqlStatement(db.delete(keys).where(ownedBy), [
      'id',
      'fingerprint',
      'attempt',
    ]),
    markUnrecorded: compileLibsqlStatement(
      db
        .update(keys)
        .set({ unrecorded: true, leaseUntil: null })
        .where(ownerRow(keys, p('id'), p('fingerprint'), p('attempt'))),
      ['id', 'fingerprint', 'attempt'],
    ),
    pendingKeys: compileLibsqlStatement(
      pendingRows(and(isPending, idStartsWith(keys, p('prefix')))),
      ['limit', 'prefix'],
    ),
    stalePendingKeys: compileLibsqlStatement(
      pendingRows(
        and(
          isPending,
          idStartsWith(keys, p('prefix')),
          or(
            eq(keys.unrecorded, true),
            lte(keys.leaseUntil, p('now')),
            and(isNull(keys.leaseUntil), lte(keys.expires, p('now'))),
          ),
        ),
      ),
      ['now', 'limit', 'prefix'],
    ),
    // The operator's release: whatever the lease and the attempt.
    releasePending: compileLibsqlStatement(
      db
        .delete(keys)
        .where(
          and(
            eq(keys.id, p('id')),
            isPending,
            sql`${keys.fingerprint} = coalesce(${p('fingerprint')}, ${keys.fingerprint})`,
          ),
        )
        .returning({ id: keys.id }),
      ['id', 'fingerprint'],
    ),
    fetch: compileLibsqlStatement(
      db
        .select({ response: keys.response })
        .from(keys)
        .where(
          and(eq(keys.id, p('id')), eq(keys.status, KeyStatus.done), gt(keys.expires, p('now'))),
        ),
      ['id', 'now'],
    ),
    get: compileLibsqlStatement(
      db
        .select()
        .from(keys)
        .where(eq(keys.id, p('id'))),
      ['id'],
    ),
    release: compileLibsqlStatement(db.delete(keys).where(ownPending), ['id', 'fingerprint']),
    expired: compileLibsqlStatement(expiredIds([asc(keys.id)]), ['now', 'limit']),
    // The candidates are chosen and deleted by one statement, so nothing can change in between;
    // the predicate is still repeated on each deleted row, so only rows that are expired answers
    // at that moment go, and RETURNING reports what was deleted, not what was selected. The unary
    // `+` keeps SQLite looking each candidate up by primary key instead of scanning the retention
    // index for the repeated predicate.
    purge: compileLibsqlStatement(
      db
        .delete(keys)
        .where(
          and(
            inArray(keys.id, expiredIds([asc(keys.id)])),
            sql`+${keys.status} = ${KeyStatus.done}`,
            sql`+${keys.expires} <= ${p('now')}`,
          ),
        )
        .returning({ id: keys.id }),
      ['now', 'limit'],
    ),
    // ORDER BY (expires, id) follows the (status, expires, id) index, so SQLite walks it from the
    // start of the range without sorting the backlog: each batch costs O(batchSize).
    sweepBatch: compileLibsqlStatement(
      db.delete(keys).where(inArray(keys.id, expiredIds([asc(keys.expires), asc(keys.id)]))),
      ['now', 'limit'],
    ),
    counts: compileLibsqlStatement(
      db
        .select({ status: keys.status, count: sql<number>`count(*)`.as('count') })
        .from(keys)
        .groupBy(keys.status),
      [],
    ),
    stats: compileLibsqlStatement(
      db
        .select({
          status: keys.status,
          count: sql<number>`count(*)`.as('count'),
          past: sql<number>`count(*) filter (where ${keys.expires} <= ${p('now')})`.as('past'),
          lapsed:
            sql<number>`count(*) filter (where ${keys.unrecorded} = 0 and ${keys.leaseUntil} <= ${p('now')})`.as(
              'lapsed',
            ),
          unrecorded: sql<number>`count(*) filter (where ${keys.unrecorded} = 1)`.as('unrecorded'),
        })
        .from(keys)
        .groupBy(keys.status),
      ['now'],
    ),
  };
}

// libSQL rows are arrays that also carry each column under its name; a copy gives plain objects.
function rowsOf<Row>(result: ResultSet): Row[] {
  return result.rows.map((row) => ({ ...row }) as Row);
}

// Every write runs as a `write` batch, so it takes the write lock before it reads; two statements
// in one batch see the same row, with no other writer in between. Every batch waits its turn in the
// client's write queue, behind any open transaction of `libsqlTransaction` on the same client.
function libsqlStatements(
  client: Client,
  queries: ReturnType<typeof compileQueries>,
  closeConnection: boolean,
): KeyStatements {
  const queued = writeQueue(client);
  const read = (statement: InStatement): Promise<ResultSet> => client.execute(statement);
  const writeBatch = (statements: InStatement[]): Promise<ResultSet[]> =>
    queued(() => client.batch(statements, 'write'));
  const write = async (statement: InStatement): Promise<ResultSet> => {
    const [result] = await writeBatch([statement]);
    if (result === undefined) throw new Error('libSQL returned no result for a batch of one');
    return result;
  };
  const changed = async (statement: InStatement): Promise<number> =>
    (await write(statement)).rowsAffected;
  const rowOf = (result: ResultSet | undefined): KeyRow | undefined =>
    result === undefined ? undefined : rowsOf<KeyRow>(result)[0];
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
      const [won, existing] = await writeBatch([
        queries.acquire.bind({ id, fingerprint, expires, leaseUntil, token, now }),
        queries.get.bind({ id }),
      ]);
      const [owned] = won === undefined ? [] : rowsOf<{ attempt: number }>(won);
      if (owned !== undefined) return { attempt: owned.attempt };
      const row = rowOf(existing);
      if (row === undefined) throw new Error('libSQL lost the row acquire conflicted with');
      return { row };
    },
    pendingKeys: async ({ now, stale, limit, prefix }) =>
      rowsOf<KeyRow>(
        await read(
          stale
            ? queries.stalePendingKeys.bind({ now, limit, prefix })
            : queries.pendingKeys.bind({ limit, prefix }),
        ),
      ),
    // The delete and the read of what stayed run in one write batch: the verdict is about the row
    // the delete saw.
    releasePending: async (id, fingerprint) => {
      const [deleted, left] = await writeBatch([
        queries.releasePending.bind({ id, fingerprint: fingerprint ?? null }),
        queries.get.bind({ id }),
      ]);
      if (deleted !== undefined && deleted.rows.length === 1) return { released: true };
      return { released: false, row: rowOf(left) };
    },
    fetch: async (id, now) => {
      const text = (await read(queries.fetch.bind({ id, now }))).rows[0]?.response;
      return typeof text === 'string' ? text : null;
    },
    get: async (id) => rowOf(await read(queries.get.bind({ id }))),
    expired: async (now, limit) =>
      rowsOf<{ id: string }>(await read(queries.expired.bind({ now, limit }))),
    purge: async (now, limit) =>
      rowsOf<{ id: string }>(await write(queries.purge.bind({ now, limit }))),
    sweepBatch: async (now, limit) => {
      const deleted = (await write(queries.sweepBatch.bind({ now, limit }))).rowsAffected;
      // A batch rewrites pages all over the file. Left in the WAL, they would be copied back by
      // whichever connection's commit crosses the auto-checkpoint threshold, usually a request's
      // reserve. Copying them here keeps that cost on the sweeper. PASSIVE never waits for other
      // connections; outside WAL mode it does nothing. A remote server owns its WAL (Turso
      // refuses the PRAGMA), so it is left to the server there.
      if (deleted > 0 && client.protocol === 'file') {
        await client.execute('PRAGMA wal_checkpoint(PASSIVE)');
      }
      return deleted;
    },
    counts: async () =>
      rowsOf<{ status: string; count: number }>(await read(queries.counts.bind({}))),
    stats: async (now) => rowsOf<StatsRow>(await read(queries.stats.bind({ now }))),
    close: () => {
      if (closeConnection) client.close();
    },
  };
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
 * const db = drizzle(createClient({ url: 'file:app.db', timeout: 5000 }));
 * await applyLibsqlMigrations(db);
 * const store = new LibsqlIdempotencyStore<{ receipt: number }>(db);
 * if (await store.reserve('order-42', digest, now + 86_400)) {
 *   await store.finish('order-42', digest, { receipt: 1 });
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
   */
  constructor(db: AnyLibsqlDatabase, options: LibsqlStoreOptions = {}) {
    const table = options.table ?? defaultKeys;
    super(
      libsqlStatements(db.$client, compileQueries(db, table), options.closeConnection ?? false),
    );
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
   * {@inheritDoc LeasedIdempotencyStore.acquire}
   *
   * The insert-or-take-over statement and the read of what is there run in one `write` batch, so
   * the row read is the one the statement left.
   */
  override acquire(
    key: string,
    digest: string,
    options: AcquireOptions,
  ): Promise<AcquireResult<T>> {
    return super.acquire(key, digest, options);
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
