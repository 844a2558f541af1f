import type BetterSqlite3 from 'better-sqlite3';
import { and, asc, eq, gt, inArray, isNull, lte, or, sql } from 'drizzle-orm';
import type { BetterSQLite3Database } from 'drizzle-orm/better-sqlite3';
import { getTableConfig } from 'drizzle-orm/sqlite-core';
import { AnswerCache } from '../core/answer-cache.js';
import { readPendingOptions } from '../core/async-store.js';
import { closeHook } from '../core/close-option.js';
import type { DeploymentReport } from '../core/deployment.js';
import { StoreClosedError } from '../core/errors.js';
import { nextFencingToken } from '../core/fencing-token.js';
import { parseResponse, serializeResponse } from '../core/json.js';
import {
  expiredAnswer,
  idStartsWith,
  leaseHolderRow,
  takeoverToken,
} from '../core/key-conditions.js';
import {
  acquiredOutcome,
  assertAttempt,
  existingOutcome,
  leaseDeadline,
  readOutcome,
  toPendingKey,
} from '../core/lease.js';
import { holdsOwnAnswer, type KeyRow, toRecord } from '../core/record.js';
import { RETENTION_CYCLE } from '../core/retention-cycle.js';
import { countByStatus, KeyStatus } from '../core/status.js';
import type {
  AcquireOptions,
  AcquireResult,
  IdempotencyRecord,
  LeasedIdempotencyStore,
  LeaseStats,
  PendingKey,
  PendingKeysOptions,
  ReleasePendingResult,
  StatusCounts,
} from '../core/store.js';
import { doneIdIndexName } from '../core/table-name.js';
import {
  assertDigest,
  assertIntegerOption,
  assertKey,
  assertLimit,
  assertTime,
  DEFAULT_LIMIT,
  MAX_BATCH_SIZE,
} from '../core/validation.js';
import { compileStatement } from './compile.js';
import { checkSqliteDeployment } from './deployment.js';
import { keys as defaultKeys, type SqliteKeysTable } from './schema.js';

/** Any drizzle database over better-sqlite3, whatever schema it was built with. */
// biome-ignore lint/suspicious/noExplicitAny: the store only uses its own table, never the user's schema
export type AnyBetterSqliteDatabase = BetterSQLite3Database<any> & {
  $client: BetterSqlite3.Database;
};

/** Options of {@link SqliteIdempotencyStore}. */
export interface SqliteStoreOptions {
  /**
   * Called once by `close()`, e.g. `() => db.$client.close()` to close a connection the store
   * owns. By default `close()` leaves the connection alone: a store built over your database
   * never closes it. `openSqliteStore` closes the connection it opened.
   */
  readonly onClose?: () => void;
  /**
   * `true` closes the better-sqlite3 connection on `close()`.
   *
   * @deprecated Use `onClose: () => db.$client.close()`, the close option of every store. Removed
   * in 1.0.
   */
  readonly closeConnection?: boolean;
  /**
   * How many stored answers `fetch` keeps in memory (least recently used first out), so replays of
   * a key skip the database. Default 0: no cache. The cache is exact for every write made through
   * the store API (see {@link AnswerCache}); each entry holds the answer's JSON text.
   */
  readonly answerCacheSize?: number;
  /**
   * The keys table, from `sqliteKeysTable(name)`. Default: the `keys` table. It must exist, made
   * by `applySqliteMigrations(db, { table })` or by your own drizzle-kit migrations.
   */
  readonly table?: SqliteKeysTable;
}

/** The largest `answerCacheSize` accepted. */
export const MAX_ANSWER_CACHE_SIZE = 10_000_000;

const p = sql.placeholder;

// The per-request operations run as better-sqlite3 statements compiled from these drizzle
// queries (see compileStatement): drizzle writes the SQL, the driver binds positionally. Statuses
// are placeholders too, so each statement has only positional parameters.
function compileHotQueries(db: AnyBetterSqliteDatabase, keys: SqliteKeysTable) {
  const client = db.$client;
  const fetchWhere = and(
    eq(keys.id, p('id')),
    eq(keys.status, p('done')),
    gt(keys.expires, p('now')),
  );
  return {
    reserve: compileStatement(
      client,
      db
        .insert(keys)
        .values({
          id: p('id'),
          fingerprint: p('fingerprint'),
          status: p('pending'),
          expires: p('expires'),
          // Written out so the statement binds placeholders only (see compileStatement).
          attempt: sql`1`,
          unrecorded: sql`0`,
        })
        .onConflictDoNothing(),
      ['id', 'fingerprint', 'pending', 'expires'],
    ),
    // One statement, so atomic: inserts a missing key with a fresh fencing token, or takes over a
    // pending row of the same fingerprint whose lease lapsed, raising its token above the old and
    // the fresh one (see takeoverToken); returns no row otherwise. A row without a lease (NULL)
    // never compares as lapsed.
    acquire: compileStatement(
      client,
      db
        .insert(keys)
        .values({
          id: p('id'),
          fingerprint: p('fingerprint'),
          status: p('pending'),
          expires: p('expires'),
          leaseUntil: p('leaseUntil'),
          attempt: p('token'),
          unrecorded: sql`0`,
        })
        .onConflictDoUpdate({
          target: keys.id,
          set: {
            attempt: takeoverToken(keys, sql`excluded.attempt`),
            leaseUntil: sql`excluded.lease_until`,
            expires: sql`excluded.expires`,
          },
          setWhere: and(
            sql`${keys.fingerprint} = excluded.fingerprint`,
            eq(keys.status, p('pending')),
            sql`${keys.unrecorded} = 0`,
            lte(keys.leaseUntil, p('now')),
          ),
        })
        .returning({ attempt: keys.attempt }),
      ['id', 'fingerprint', 'pending', 'expires', 'leaseUntil', 'token', 'pending', 'now'],
    ),
    finishFenced: compileStatement(
      client,
      db
        .update(keys)
        .set({ status: sql<KeyStatus>`${p('done')}`, response: sql<string>`${p('response')}` })
        .where(
          and(
            eq(keys.id, p('id')),
            eq(keys.fingerprint, p('fingerprint')),
            eq(keys.status, p('pending')),
            eq(keys.attempt, p('attempt')),
          ),
        ),
      ['done', 'response', 'id', 'fingerprint', 'pending', 'attempt'],
    ),
    finish: compileStatement(
      client,
      db
        .update(keys)
        .set({ status: sql<KeyStatus>`${p('done')}`, response: sql<string>`${p('response')}` })
        .where(
          and(
            eq(keys.id, p('id')),
            eq(keys.fingerprint, p('fingerprint')),
            eq(keys.status, p('pending')),
          ),
        ),
      ['done', 'response', 'id', 'fingerprint', 'pending'],
    ),
    // Only the text is needed without a cache: pluck skips building a row.
    fetch: compileStatement(
      client,
      db.select({ response: keys.response }).from(keys).where(fetchWhere),
      ['id', 'done', 'now'],
    ).pluck(),
    // A replay's lookup: the columns come back under their own names, the shape of KeyRow.
    get: compileStatement(
      client,
      db
        .select()
        .from(keys)
        .where(eq(keys.id, p('id'))),
      ['id'],
    ),
    // With a cache the deadline is needed too, as a bare array.
    fetchWithExpiry: compileStatement(
      client,
      db.select({ response: keys.response, expires: keys.expires }).from(keys).where(fetchWhere),
      ['id', 'done', 'now'],
    ).raw(),
  };
}

function prepareQueries(db: AnyBetterSqliteDatabase, keys: SqliteKeysTable) {
  const isExpired = expiredAnswer(keys, p('now'));
  const ownedBy = leaseHolderRow(keys, p('id'), p('fingerprint'), p('attempt'));
  const pendingColumns = {
    id: keys.id,
    fingerprint: keys.fingerprint,
    status: keys.status,
    response: keys.response,
    expires: keys.expires,
    lease_until: keys.leaseUntil,
    attempt: keys.attempt,
    unrecorded: keys.unrecorded,
  };
  const isPending = eq(keys.status, KeyStatus.pending);
  return {
    renew: db
      .update(keys)
      .set({ leaseUntil: sql`${p('leaseUntil')}` })
      .where(ownedBy)
      .prepare(),
    releaseFenced: db.delete(keys).where(ownedBy).prepare(),
    markUnrecorded: db
      .update(keys)
      .set({ unrecorded: true, leaseUntil: null })
      .where(
        and(
          eq(keys.id, p('id')),
          eq(keys.fingerprint, p('fingerprint')),
          isPending,
          eq(keys.attempt, p('attempt')),
        ),
      )
      .prepare(),
    pendingKeys: db
      .select(pendingColumns)
      .from(keys)
      .where(and(isPending, idStartsWith(keys, p('prefix'))))
      .orderBy(asc(keys.id))
      .limit(p('limit'))
      .prepare(),
    stalePendingKeys: db
      .select(pendingColumns)
      .from(keys)
      .where(
        and(
          isPending,
          idStartsWith(keys, p('prefix')),
          or(
            eq(keys.unrecorded, true),
            lte(keys.leaseUntil, p('now')),
            and(isNull(keys.leaseUntil), lte(keys.expires, p('now'))),
          ),
        ),
      )
      .orderBy(asc(keys.id))
      .limit(p('limit'))
      .prepare(),
    // The operator's release: whatever the lease and the attempt.
    releasePending: db
      .delete(keys)
      .where(
        and(
          eq(keys.id, p('id')),
          isPending,
          sql`${keys.fingerprint} = coalesce(${p('fingerprint')}, ${keys.fingerprint})`,
        ),
      )
      .returning({ id: keys.id })
      .prepare(),
    leaseCounts: db
      .select({
        lapsed: sql<number>`coalesce(sum(${keys.unrecorded} = 0 AND ${keys.leaseUntil} <= ${p('now')}), 0)`,
        unrecorded: sql<number>`coalesce(sum(${keys.unrecorded}), 0)`,
      })
      .from(keys)
      .where(isPending)
      .prepare(),
    // How many expired answers there are, counting no further than `cap`: one walk of the
    // retention index's range, stopped at `cap` entries.
    backlogUpTo: db
      .select({ count: sql<number>`count(*)` })
      .from(db.select({ id: keys.id }).from(keys).where(isExpired).limit(p('cap')).as('backlog'))
      .prepare(),
    // A small backlog: its ids come from the retention index's range and are sorted.
    expiredSorted: db
      .select({ id: keys.id })
      .from(keys)
      .where(isExpired)
      .orderBy(asc(keys.id))
      .limit(p('limit'))
      .prepare(),
    // A large backlog: done rows are walked in id order on the partial index of done rows, whose
    // entries carry `expires`, until `limit` expired ones are found; nothing is sorted. The index
    // is named because SQLite, without statistics, would rather sort the retention index's range.
    expiredById: db
      // A column of a table named in raw SQL: drizzle checks plain column fields against `from`.
      .select({ id: sql<string>`${keys.id}` })
      .from(sql`${keys} indexed by ${sql.identifier(doneIdIndexName(getTableConfig(keys).name))}`)
      .where(
        and(sql`${keys.status} = ${sql.raw(`'${KeyStatus.done}'`)}`, lte(keys.expires, p('now'))),
      )
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
            .where(isExpired)
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
  };
}

// Up to this many expired answers per id asked for, sorting the backlog is cheapest; beyond it,
// walking done rows in id order finds the lowest expired ids sooner (about limit × done rows ÷
// backlog entries), so the cost of a purge stays flat however large the backlog grows.
const SORTED_BACKLOG_PER_ID = 40;

// The lowest `limit` expired ids, ascending, by whichever plan is cheaper for this backlog.
function expiredCandidates(
  queries: ReturnType<typeof prepareQueries>,
  now: number,
  limit: number,
): string[] {
  const cap = limit * SORTED_BACKLOG_PER_ID;
  const backlog = queries.backlogUpTo.all({ now, cap })[0]?.count ?? 0;
  const query = backlog < cap ? queries.expiredSorted : queries.expiredById;
  return query.all({ now, limit }).map((row) => row.id);
}

/**
 * The idempotency store on SQLite, over a drizzle better-sqlite3 database. Every operation is a
 * query prepared once and runs synchronously. The table must exist: use `openSqliteStore`, or
 * `applySqliteMigrations`, or your own drizzle-kit migrations with the exported `keys` table (or
 * one built by `sqliteKeysTable(name)`, given as `{ table }`).
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
export class SqliteIdempotencyStore<T = unknown> implements LeasedIdempotencyStore<T> {
  readonly #db: AnyBetterSqliteDatabase;
  readonly #queries: ReturnType<typeof prepareQueries>;
  readonly #hot: ReturnType<typeof compileHotQueries>;
  readonly #cache: AnswerCache | undefined;
  readonly #onClose: (() => unknown) | undefined;
  readonly #table: SqliteKeysTable;
  #closed = false;

  /**
   * @param db - a drizzle database over better-sqlite3; the store shares its connection
   * @param options - see {@link SqliteStoreOptions}
   */
  constructor(db: AnyBetterSqliteDatabase, options: SqliteStoreOptions = {}) {
    const cacheSize = options.answerCacheSize ?? 0;
    assertIntegerOption(cacheSize, 'answerCacheSize', 0, MAX_ANSWER_CACHE_SIZE);
    this.#db = db;
    const table = options.table ?? defaultKeys;
    this.#queries = prepareQueries(db, table);
    this.#hot = compileHotQueries(db, table);
    this.#cache = cacheSize > 0 ? new AnswerCache(cacheSize) : undefined;
    this.#onClose = closeHook(db.$client, options);
    this.#table = table;
  }

  /** The drizzle database the store runs on; use it to run your own queries on the same connection. */
  get db(): AnyBetterSqliteDatabase {
    return this.#db;
  }

  /** The keys table the store keeps its rows in; `sqliteTransaction` records there. */
  get table(): SqliteKeysTable {
    return this.#table;
  }

  /**
   * Reads this connection's `journal_mode` and `synchronous`: see `checkSqliteDeployment`.
   * `openSqliteStore` runs it at open.
   *
   * @example
   * ```ts
   * const { findings } = store.checkDeployment();
   * ```
   */
  checkDeployment(): DeploymentReport {
    return checkSqliteDeployment(this.#db.$client);
  }

  #open(): ReturnType<typeof prepareQueries> {
    if (this.#closed) throw new StoreClosedError();
    return this.#queries;
  }

  #openHot(): ReturnType<typeof compileHotQueries> {
    if (this.#closed) throw new StoreClosedError();
    return this.#hot;
  }

  /** {@inheritDoc IdempotencyStore.reserve} */
  reserve(key: string, digest: string, expires: number): boolean {
    assertKey(key);
    assertDigest(digest);
    assertTime(expires, 'expires');
    const inserted =
      this.#openHot().reserve.run(key, digest, KeyStatus.pending, expires).changes === 1;
    // The row was absent, so any answer cached for this key was retired elsewhere.
    if (inserted) this.#cache?.forget(key);
    return inserted;
  }

  /** {@inheritDoc LeasedIdempotencyStore.finish} */
  finish(key: string, digest: string, response: T, attempt?: number): boolean {
    assertKey(key);
    assertDigest(digest);
    if (attempt !== undefined) assertAttempt(attempt);
    const text = serializeResponse(response);
    const hot = this.#openHot();
    if (attempt === undefined) {
      return hot.finish.run(KeyStatus.done, text, key, digest, KeyStatus.pending).changes === 1;
    }
    const result = hot.finishFenced.run(
      KeyStatus.done,
      text,
      key,
      digest,
      KeyStatus.pending,
      attempt,
    );
    if (result.changes === 1) return true;
    return holdsOwnAnswer(hot.get.get(key) as KeyRow | undefined, digest, attempt, text);
  }

  /** {@inheritDoc LeasedIdempotencyStore.acquire} */
  acquire(key: string, digest: string, options: AcquireOptions): AcquireResult<T> {
    assertKey(key);
    assertDigest(digest);
    const leaseUntil = leaseDeadline(options);
    const hot = this.#openHot();
    const { expires, now } = options;
    const read = readOutcome<T>(hot.get.get(key) as KeyRow | undefined, digest, now);
    if (read !== undefined) return read;
    // The statement either owns the row or leaves it as it was; what is there is then read. A row
    // deleted in between (released, purged) makes the key new again: try once more.
    for (;;) {
      const token = nextFencingToken();
      const won = hot.acquire.get(
        key,
        digest,
        KeyStatus.pending,
        expires,
        leaseUntil,
        token,
        KeyStatus.pending,
        now,
      ) as { attempt: number } | undefined;
      if (won !== undefined) {
        const outcome = acquiredOutcome<T>(won.attempt, token, leaseUntil);
        // Inserted afresh, so any answer cached for this key was retired elsewhere.
        if (!outcome.takenOver) this.#cache?.forget(key);
        return outcome;
      }
      const row = hot.get.get(key) as KeyRow | undefined;
      if (row !== undefined) return existingOutcome<T>(row, digest);
    }
  }

  /** {@inheritDoc LeasedIdempotencyStore.renew} */
  renew(key: string, digest: string, attempt: number, leaseUntil: number): boolean {
    assertKey(key);
    assertDigest(digest);
    assertAttempt(attempt);
    assertTime(leaseUntil, 'leaseUntil');
    return (
      this.#open().renew.run({ id: key, fingerprint: digest, attempt, leaseUntil }).changes === 1
    );
  }

  /** {@inheritDoc LeasedIdempotencyStore.markUnrecorded} */
  markUnrecorded(key: string, digest: string, attempt: number): boolean {
    assertKey(key);
    assertDigest(digest);
    assertAttempt(attempt);
    return this.#open().markUnrecorded.run({ id: key, fingerprint: digest, attempt }).changes === 1;
  }

  /** {@inheritDoc LeasedIdempotencyStore.pendingKeys} */
  pendingKeys(options: PendingKeysOptions): PendingKey[] {
    const { now, stale, limit, prefix } = readPendingOptions(options);
    const queries = this.#open();
    const rows = stale
      ? queries.stalePendingKeys.all({ now, limit, prefix })
      : queries.pendingKeys.all({ limit, prefix });
    return rows.map((row) => toPendingKey(row, now));
  }

  /** {@inheritDoc LeasedIdempotencyStore.releasePending} */
  releasePending(key: string, fingerprint?: string): ReleasePendingResult {
    assertKey(key);
    if (fingerprint !== undefined) assertDigest(fingerprint);
    const queries = this.#open();
    const hot = this.#openHot();
    return this.#db.transaction(
      () => {
        const deleted = queries.releasePending.all({ id: key, fingerprint: fingerprint ?? null });
        if (deleted.length === 1) return 'released';
        const row = hot.get.get(key) as KeyRow | undefined;
        if (row === undefined) return 'missing';
        return row.status === KeyStatus.done ? 'done' : 'mismatch';
      },
      { behavior: 'immediate' },
    );
  }

  /** {@inheritDoc IdempotencyStore.fetch} */
  fetch(key: string, now: number): T | null {
    assertKey(key);
    assertTime(now, 'now');
    const hot = this.#openHot();
    const cache = this.#cache;
    if (cache === undefined) {
      const text = hot.fetch.get(key, KeyStatus.done, now) as string | null | undefined;
      return text == null ? null : parseResponse<T>(text);
    }
    // Parsed on every hit, so a caller mutating its copy cannot change what is replayed next.
    const cached = cache.get(key, now);
    if (cached !== undefined) return parseResponse<T>(cached);
    const row = hot.fetchWithExpiry.get(key, KeyStatus.done, now) as
      | [string | null, number]
      | undefined;
    if (row === undefined || row[0] === null) return null;
    // Inside a transaction the row may not be committed yet, and a rollback would un-write it.
    if (!this.#db.$client.inTransaction) cache.remember(key, row[0], row[1]);
    return parseResponse<T>(row[0]);
  }

  /** {@inheritDoc IdempotencyStore.expired} */
  expired(now: number, limit: number = DEFAULT_LIMIT): string[] {
    assertLimit(limit);
    assertTime(now, 'now');
    return expiredCandidates(this.#open(), now, limit);
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
    this.#cache?.retire(now);
    return this.#db.transaction(
      () => {
        const candidates = expiredCandidates(queries, now, limit);
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
    this.#cache?.retire(now);
    const deleted = this.#db.transaction(
      () => queries.sweepBatch.run({ now, limit: batchSize }).changes,
      { behavior: 'immediate' },
    );
    // A batch rewrites pages all over the file. Left in the WAL, they would be copied back by
    // whichever connection's commit crosses the auto-checkpoint threshold, usually a request's
    // reserve, which then waits tens of milliseconds. Copying them here keeps that cost on the
    // sweeper. PASSIVE never waits for other connections; outside WAL mode it does nothing.
    if (deleted > 0 && !this.#db.$client.inTransaction) {
      this.#db.$client.pragma('wal_checkpoint(PASSIVE)');
    }
    return deleted;
  }

  /** {@inheritDoc LeasedIdempotencyStore.stats} */
  stats(now: number): LeaseStats {
    assertTime(now, 'now');
    const queries = this.#open();
    const past = countByStatus(queries.countPastDeadline.all({ now }));
    const leases = queries.leaseCounts.get({ now });
    return {
      ...this.counts(),
      expired: past.done,
      stalePending: past.pending,
      lapsed: Number(leases?.lapsed ?? 0),
      unrecorded: Number(leases?.unrecorded ?? 0),
    };
  }

  /** {@inheritDoc LeasedIdempotencyStore.release} */
  release(key: string, digest: string, attempt?: number): boolean {
    assertKey(key);
    assertDigest(digest);
    if (attempt === undefined) {
      return this.#open().release.run({ id: key, fingerprint: digest }).changes === 1;
    }
    assertAttempt(attempt);
    return this.#open().releaseFenced.run({ id: key, fingerprint: digest, attempt }).changes === 1;
  }

  /** {@inheritDoc IdempotencyStore.get} */
  get(key: string): IdempotencyRecord<T> | null {
    assertKey(key);
    const row = this.#openHot().get.get(key) as KeyRow | undefined;
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
    this.#cache?.clear();
    this.#onClose?.();
  }
}
