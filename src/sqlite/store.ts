import type BetterSqlite3 from 'better-sqlite3';
import { and, asc, eq, gt, inArray, lte, sql } from 'drizzle-orm';
import type { BetterSQLite3Database } from 'drizzle-orm/better-sqlite3';
import { StoreClosedError } from '../core/errors.js';
import { parseResponse, serializeResponse } from '../core/json.js';
import { toRecord } from '../core/record.js';
import { RETENTION_CYCLE } from '../core/retention-cycle.js';
import { countByStatus, KeyStatus } from '../core/status.js';
import type {
  IdempotencyRecord,
  IdempotencyStore,
  RetentionStats,
  StatusCounts,
} from '../core/store.js';
import {
  assertDigest,
  assertIntegerOption,
  assertKey,
  assertLimit,
  assertTime,
  DEFAULT_LIMIT,
  MAX_BATCH_SIZE,
} from '../core/validation.js';
import { keys } from './schema.js';

/** Any drizzle database over better-sqlite3, whatever schema it was built with. */
// biome-ignore lint/suspicious/noExplicitAny: the store only uses its own table, never the user's schema
export type AnyBetterSqliteDatabase = BetterSQLite3Database<any> & {
  $client: BetterSqlite3.Database;
};

/** Options of {@link SqliteIdempotencyStore}. */
export interface SqliteStoreOptions {
  /**
   * Whether `close()` also closes the better-sqlite3 connection. Default `false`: a store built
   * over your database leaves your connection open. `openSqliteStore` sets it to `true`.
   */
  readonly closeConnection?: boolean;
}

const p = sql.placeholder;

// Retention only ever selects done rows past their deadline; a pending row is owned by its worker.
const isExpiredAnswer = and(eq(keys.status, KeyStatus.done), lte(keys.expires, p('now')));

function prepareQueries(db: AnyBetterSqliteDatabase) {
  return {
    reserve: db
      .insert(keys)
      .values({
        id: p('id'),
        fingerprint: p('fingerprint'),
        status: KeyStatus.pending,
        expires: p('expires'),
      })
      .onConflictDoNothing()
      .prepare(),
    finish: db
      .update(keys)
      .set({ status: KeyStatus.done, response: sql<string>`${p('response')}` })
      .where(
        and(
          eq(keys.id, p('id')),
          eq(keys.fingerprint, p('fingerprint')),
          eq(keys.status, KeyStatus.pending),
        ),
      )
      .prepare(),
    fetch: db
      .select({ response: keys.response })
      .from(keys)
      .where(and(eq(keys.id, p('id')), eq(keys.status, KeyStatus.done), gt(keys.expires, p('now'))))
      .prepare(),
    expired: db
      .select({ id: keys.id })
      .from(keys)
      .where(isExpiredAnswer)
      .orderBy(asc(keys.id))
      .limit(p('limit'))
      .prepare(),
    // The ids come as one JSON array so the statement is prepared once for any batch size.
    // The predicate is repeated: only rows that are still expired answers are deleted. Its unary
    // `+` keeps SQLite from answering it with the retention index (a scan of the whole backlog)
    // instead of looking each id up by primary key.
    deleteExpiredIds: db
      .delete(keys)
      .where(
        and(
          inArray(keys.id, sql`(select value from json_each(${p('ids')}))`),
          sql`+${keys.status} = ${KeyStatus.done}`,
          sql`+${keys.expires} <= ${p('now')}`,
        ),
      )
      .returning({ id: keys.id })
      .prepare(),
    // ORDER BY (expires, id) follows the (status, expires, id) index, so SQLite walks it from the
    // start of the range without sorting, and the outer delete finds each row by primary key:
    // each batch costs O(batchSize), whatever the backlog. One statement is atomic, so the
    // predicate needs no repeating here (repeating it would make SQLite scan the whole range).
    sweepBatch: db
      .delete(keys)
      .where(
        inArray(
          keys.id,
          db
            .select({ id: keys.id })
            .from(keys)
            .where(isExpiredAnswer)
            .orderBy(asc(keys.expires), asc(keys.id))
            .limit(p('limit')),
        ),
      )
      .prepare(),
    countPastDeadline: db
      .select({ status: keys.status, count: sql<number>`count(*)` })
      .from(keys)
      .where(lte(keys.expires, p('now')))
      .groupBy(keys.status)
      .prepare(),
    counts: db
      .select({ status: keys.status, count: sql<number>`count(*)` })
      .from(keys)
      .groupBy(keys.status)
      .prepare(),
    release: db
      .delete(keys)
      .where(
        and(
          eq(keys.id, p('id')),
          eq(keys.fingerprint, p('fingerprint')),
          eq(keys.status, KeyStatus.pending),
        ),
      )
      .prepare(),
    get: db
      .select()
      .from(keys)
      .where(eq(keys.id, p('id')))
      .prepare(),
  };
}

/**
 * The idempotency store on SQLite, over a drizzle better-sqlite3 database. Every operation is a
 * query prepared once and runs synchronously. The table must exist: use `openSqliteStore`, or
 * `applySqliteMigrations`, or your own drizzle-kit migrations with the exported `keys` table.
 *
 * @typeParam T - the type of the stored responses
 * @example
 * ```ts
 * import Database from 'better-sqlite3';
 * import { drizzle } from 'drizzle-orm/better-sqlite3';
 * import { applySqliteMigrations, SqliteIdempotencyStore } from 'drizzle-idempotency/sqlite';
 *
 * const db = drizzle(new Database('app.db'));
 * applySqliteMigrations(db);
 * const store = new SqliteIdempotencyStore<{ receipt: number }>(db);
 * if (store.reserve('order-42', digest, now + 86_400)) {
 *   store.finish('order-42', digest, { receipt: 1 });
 * }
 * store.fetch('order-42', now); // { receipt: 1 }
 * ```
 */
export class SqliteIdempotencyStore<T = unknown> implements IdempotencyStore<T> {
  readonly #db: AnyBetterSqliteDatabase;
  readonly #queries: ReturnType<typeof prepareQueries>;
  readonly #closeConnection: boolean;
  #closed = false;

  /**
   * @param db - a drizzle database over better-sqlite3; the store shares its connection
   * @param options - see {@link SqliteStoreOptions}
   */
  constructor(db: AnyBetterSqliteDatabase, options: SqliteStoreOptions = {}) {
    this.#db = db;
    this.#queries = prepareQueries(db);
    this.#closeConnection = options.closeConnection ?? false;
  }

  /** The drizzle database the store runs on; use it to run your own queries on the same connection. */
  get db(): AnyBetterSqliteDatabase {
    return this.#db;
  }

  #open(): ReturnType<typeof prepareQueries> {
    if (this.#closed) throw new StoreClosedError();
    return this.#queries;
  }

  /** {@inheritDoc IdempotencyStore.reserve} */
  reserve(key: string, digest: string, expires: number): boolean {
    assertKey(key);
    assertDigest(digest);
    assertTime(expires, 'expires');
    return this.#open().reserve.run({ id: key, fingerprint: digest, expires }).changes === 1;
  }

  /** {@inheritDoc IdempotencyStore.finish} */
  finish(key: string, digest: string, response: T): boolean {
    assertKey(key);
    assertDigest(digest);
    const text = serializeResponse(response);
    return this.#open().finish.run({ id: key, fingerprint: digest, response: text }).changes === 1;
  }

  /** {@inheritDoc IdempotencyStore.fetch} */
  fetch(key: string, now: number): T | null {
    assertKey(key);
    assertTime(now, 'now');
    const row = this.#open().fetch.get({ id: key, now });
    return row?.response == null ? null : parseResponse<T>(row.response);
  }

  /** {@inheritDoc IdempotencyStore.expired} */
  expired(now: number, limit: number = DEFAULT_LIMIT): string[] {
    assertLimit(limit);
    assertTime(now, 'now');
    return this.#open()
      .expired.all({ now, limit })
      .map((row) => row.id);
  }

  /**
   * {@inheritDoc IdempotencyStore.purge}
   *
   * One immediate transaction: the candidates are selected in id order, then deleted with the
   * predicate repeated, and only the ids actually deleted are returned, still ascending.
   */
  purge(now: number, limit: number = DEFAULT_LIMIT): string[] {
    assertLimit(limit);
    assertTime(now, 'now');
    const queries = this.#open();
    return this.#db.transaction(
      () => {
        const candidates = queries.expired.all({ now, limit }).map((row) => row.id);
        if (candidates.length === 0) return [];
        const deleted = new Set(
          queries.deleteExpiredIds
            .all({ ids: JSON.stringify(candidates), now })
            .map((row) => row.id),
        );
        return candidates.filter((id) => deleted.has(id));
      },
      { behavior: 'immediate' },
    );
  }

  /** {@inheritDoc IdempotencyStore.counts} */
  counts(): StatusCounts {
    return countByStatus(this.#open().counts.all());
  }

  /** {@inheritDoc IdempotencyStore.sweepBatch} */
  sweepBatch(now: number, batchSize: number): number {
    assertIntegerOption(batchSize, 'batchSize', 1, MAX_BATCH_SIZE);
    assertTime(now, 'now');
    const queries = this.#open();
    return this.#db.transaction(() => queries.sweepBatch.run({ now, limit: batchSize }).changes, {
      behavior: 'immediate',
    });
  }

  /** {@inheritDoc IdempotencyStore.stats} */
  stats(now: number): RetentionStats {
    assertTime(now, 'now');
    const past = countByStatus(this.#open().countPastDeadline.all({ now }));
    return { ...this.counts(), expired: past.done, stalePending: past.pending };
  }

  /** {@inheritDoc IdempotencyStore.release} */
  release(key: string, digest: string): boolean {
    assertKey(key);
    assertDigest(digest);
    return this.#open().release.run({ id: key, fingerprint: digest }).changes === 1;
  }

  /** {@inheritDoc IdempotencyStore.get} */
  get(key: string): IdempotencyRecord<T> | null {
    assertKey(key);
    const row = this.#open().get.get({ id: key });
    return row ? toRecord<T>(row) : null;
  }

  /** {@inheritDoc IdempotencyStore.retentionCycle} */
  retentionCycle(key: string): boolean {
    assertKey(key);
    const { first, purgeAt, second } = RETENTION_CYCLE;
    this.reserve(key, first.digest, first.expires);
    this.finish(key, first.digest, first.response as T);
    this.purge(purgeAt);
    return this.reserve(key, second.digest, second.expires);
  }

  /** {@inheritDoc IdempotencyStore.close} */
  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    if (this.#closeConnection) this.#db.$client.close();
  }
}
