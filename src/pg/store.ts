import { createHash } from 'node:crypto';
import { and, asc, eq, gt, inArray, isNull, lte, or, sql } from 'drizzle-orm';
import type { PgDatabase, PgQueryResultHKT } from 'drizzle-orm/pg-core';
import { StoreClosedError } from '../core/errors.js';
import { parseResponse, serializeResponse } from '../core/json.js';
import {
  acquiredOutcome,
  assertAttempt,
  existingOutcome,
  leaseDeadline,
  pendingLimit,
  toPendingKey,
} from '../core/lease.js';
import { compareKeys } from '../core/order.js';
import { toRecord } from '../core/record.js';
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
import {
  assertDigest,
  assertIntegerOption,
  assertKey,
  assertLimit,
  assertTime,
  DEFAULT_LIMIT,
  MAX_BATCH_SIZE,
} from '../core/validation.js';
import { compilePgStatement } from './compile.js';
import { type PgKeysTable, type PgTableOptions, resolvePgTable } from './schema.js';

/**
 * Any drizzle PostgreSQL database, whatever its driver (node-postgres, PGlite, …) and schema.
 */
// biome-ignore lint/suspicious/noExplicitAny: the store only uses its own table, never the user's schema
export type AnyPgDatabase = PgDatabase<PgQueryResultHKT, any>;

/** Options of {@link PgIdempotencyStore}. */
export interface PgStoreOptions extends PgTableOptions {
  /**
   * Called once by `close()`, e.g. to end a pool the store owns. By default `close()` leaves the
   * connection alone: a store built over your database never ends your pool.
   */
  readonly onClose?: () => unknown;
}

const p = sql.placeholder;

// Named statements are kept per connection by name, and node-postgres refuses one name for two
// texts: the schema and the table are part of the text, so they are part of the name too.
function statementNames(schema: string, table: string): (operation: string) => string {
  const tag = createHash('sha256').update(`${schema}.${table}`).digest('hex').slice(0, 12);
  return (operation) => `idempotency_${tag}_${operation}`;
}

function prepareQueries(db: AnyPgDatabase, keys: PgKeysTable, schema: string, table: string) {
  const name = statementNames(schema, table);
  // Retention only ever selects done rows past their deadline; a pending row is owned by its worker.
  const isExpiredAnswer = and(eq(keys.status, KeyStatus.done), lte(keys.expires, p('now')));
  const ownPending = and(
    eq(keys.id, p('id')),
    eq(keys.fingerprint, p('fingerprint')),
    eq(keys.status, KeyStatus.pending),
  );
  // One statement is one transaction: the candidates are locked with FOR UPDATE SKIP LOCKED, so
  // parallel purgers on other connections skip them and take disjoint batches, and the delete
  // repeats the predicate so a row that stopped being an expired answer is never deleted.
  // RETURNING reports what was deleted, not what was selected.
  const deleteExpired = (candidates: ReturnType<typeof lockExpired>) =>
    db
      .with(candidates)
      .delete(keys)
      .where(
        and(inArray(keys.id, db.select({ id: candidates.id }).from(candidates)), isExpiredAnswer),
      )
      .returning({ id: keys.id });
  const lockExpired = (alias: string, order: ReturnType<typeof asc>[]) =>
    db.$with(alias).as(
      db
        .select({ id: keys.id })
        .from(keys)
        .where(isExpiredAnswer)
        .orderBy(...order)
        .limit(p('limit'))
        .for('update', { skipLocked: true }),
    );
  const fetchWhere = and(
    eq(keys.id, p('id')),
    eq(keys.status, KeyStatus.done),
    gt(keys.expires, p('now')),
  );
  const isPending = eq(keys.status, KeyStatus.pending);
  // The row an owner holds with its token, not handed to an operator: the fenced writes' target.
  const ownedBy = and(ownPending, eq(keys.attempt, p('attempt')), eq(keys.unrecorded, false));
  // Under the columns' own names, so drizzle's path and the direct one give rows of one shape.
  const rowColumns = {
    id: keys.id,
    fingerprint: keys.fingerprint,
    status: keys.status,
    response: keys.response,
    expires: keys.expires,
    lease_until: keys.leaseUntil,
    attempt: keys.attempt,
    unrecorded: keys.unrecorded,
  };
  const pendingList = (where: ReturnType<typeof and>) =>
    db.select(rowColumns).from(keys).where(where).orderBy(asc(keys.id)).limit(p('limit'));
  return {
    // One statement, so atomic: inserts a missing key with attempt 1, or takes over a pending row
    // of the same fingerprint whose lease lapsed, bumping its attempt (the conflicting row is
    // locked meanwhile, so of concurrent contenders one wins and the others see its new lease);
    // returns no row otherwise. A row without a lease (NULL) never compares as lapsed.
    acquire: compilePgStatement(
      db,
      name('acquire'),
      db
        .insert(keys)
        .values({
          id: p('id'),
          fingerprint: p('fingerprint'),
          status: KeyStatus.pending,
          expires: p('expires'),
          leaseUntil: p('leaseUntil'),
          attempt: sql`1`,
          unrecorded: sql`false`,
        })
        .onConflictDoUpdate({
          target: keys.id,
          set: {
            attempt: sql`${keys.attempt} + 1`,
            leaseUntil: sql`excluded.lease_until`,
            expires: sql`excluded.expires`,
          },
          setWhere: and(
            sql`${keys.fingerprint} = excluded.fingerprint`,
            isPending,
            eq(keys.unrecorded, false),
            lte(keys.leaseUntil, p('now')),
          ),
        })
        .returning({ attempt: keys.attempt }),
      ['id', 'fingerprint', 'expires', 'leaseUntil', 'now'],
    ),
    finishFenced: compilePgStatement(
      db,
      name('finish_fenced'),
      db
        .update(keys)
        .set({ status: KeyStatus.done, response: sql<string>`${p('response')}` })
        .where(and(ownPending, eq(keys.attempt, p('attempt'))))
        .returning({ id: keys.id }),
      ['id', 'fingerprint', 'response', 'attempt'],
    ),
    renew: compilePgStatement(
      db,
      name('renew'),
      db
        .update(keys)
        .set({ leaseUntil: sql`${p('leaseUntil')}` })
        .where(ownedBy)
        .returning({ id: keys.id }),
      ['id', 'fingerprint', 'attempt', 'leaseUntil'],
    ),
    releaseFenced: compilePgStatement(
      db,
      name('release_fenced'),
      db.delete(keys).where(ownedBy).returning({ id: keys.id }),
      ['id', 'fingerprint', 'attempt'],
    ),
    markUnrecorded: db
      .update(keys)
      .set({ unrecorded: true, leaseUntil: null })
      .where(and(ownPending, eq(keys.attempt, p('attempt'))))
      .returning({ id: keys.id })
      .prepare(name('mark_unrecorded')),
    pendingKeys: pendingList(isPending).prepare(name('pending_keys')),
    stalePendingKeys: pendingList(
      and(
        isPending,
        or(
          eq(keys.unrecorded, true),
          lte(keys.leaseUntil, p('now')),
          and(isNull(keys.leaseUntil), lte(keys.expires, p('now'))),
        ),
      ),
    ).prepare(name('stale_pending_keys')),
    // The operator's release: whatever the lease and the attempt.
    releasePending: db
      .delete(keys)
      .where(
        and(
          eq(keys.id, p('id')),
          isPending,
          sql`${keys.fingerprint} = coalesce(${p('fingerprint')}::text, ${keys.fingerprint})`,
        ),
      )
      .returning({ id: keys.id })
      .prepare(name('release_pending')),
    // The per-request operations skip drizzle's per-call work where the driver allows it (see
    // compilePgStatement); drizzle still writes their SQL.
    reserve: compilePgStatement(
      db,
      name('reserve'),
      db
        .insert(keys)
        .values({
          id: p('id'),
          fingerprint: p('fingerprint'),
          status: KeyStatus.pending,
          expires: p('expires'),
        })
        .onConflictDoNothing()
        .returning({ id: keys.id }),
      ['id', 'fingerprint', 'expires'],
    ),
    finish: compilePgStatement(
      db,
      name('finish'),
      db
        .update(keys)
        .set({ status: KeyStatus.done, response: sql<string>`${p('response')}` })
        .where(ownPending)
        .returning({ id: keys.id }),
      ['id', 'fingerprint', 'response'],
    ),
    fetch: compilePgStatement(
      db,
      name('fetch'),
      db.select({ response: keys.response }).from(keys).where(fetchWhere),
      ['id', 'now'],
    ),
    release: compilePgStatement(
      db,
      name('release'),
      db.delete(keys).where(ownPending).returning({ id: keys.id }),
      ['id', 'fingerprint'],
    ),
    get: compilePgStatement(
      db,
      name('get'),
      db
        .select(rowColumns)
        .from(keys)
        .where(eq(keys.id, p('id'))),
      ['id'],
    ),
    expired: db
      .select({ id: keys.id })
      .from(keys)
      .where(isExpiredAnswer)
      .orderBy(asc(keys.id))
      .limit(p('limit'))
      .prepare(name('expired')),
    purge: deleteExpired(lockExpired('candidates', [asc(keys.id)])).prepare(name('purge')),
    // Index order (expires, id): each batch reads the start of the retention index range instead
    // of sorting the whole backlog, so a sweep stays linear in it.
    sweepBatch: deleteExpired(lockExpired('batch', [asc(keys.expires), asc(keys.id)])).prepare(
      name('sweep_batch'),
    ),
    counts: db
      .select({ status: keys.status, count: sql<string>`count(*)` })
      .from(keys)
      .groupBy(keys.status)
      .prepare(name('counts')),
    stats: db
      .select({
        status: keys.status,
        count: sql<string>`count(*)`,
        past: sql<string>`count(*) filter (where ${keys.expires} <= ${p('now')})`,
        lapsed: sql<string>`count(*) filter (where not ${keys.unrecorded} and ${keys.leaseUntil} <= ${p('now')})`,
        unrecorded: sql<string>`count(*) filter (where ${keys.unrecorded})`,
      })
      .from(keys)
      .groupBy(keys.status)
      .prepare(name('stats')),
  };
}

/**
 * The idempotency store on PostgreSQL, over any drizzle PostgreSQL database (a node-postgres
 * `Pool` is the usual one; PGlite works too). Every operation is one named prepared statement, so
 * it is one round trip and atomic on its own. The table must exist: use `openPgStore`, or
 * `applyPgMigrations`, or your own drizzle-kit migrations with the exported table.
 *
 * Safe with many application instances sharing one database: `reserve` is an
 * `INSERT … ON CONFLICT DO NOTHING`, `finish` one conditional `UPDATE`, and the purge locks its
 * candidates with `FOR UPDATE SKIP LOCKED` so parallel purgers take disjoint batches.
 *
 * @typeParam T - the type of the stored responses
 * @example
 * ```ts
 * import { Pool } from 'pg';
 * import { drizzle } from 'drizzle-orm/node-postgres';
 * import { applyPgMigrations, PgIdempotencyStore } from 'drizzle-idempotency/pg';
 *
 * const db = drizzle(new Pool({ connectionString: process.env.DATABASE_URL }));
 * await applyPgMigrations(db);
 * const store = new PgIdempotencyStore<{ receipt: number }>(db);
 * if (await store.reserve('order-42', digest, now + 86_400)) {
 *   await store.finish('order-42', digest, { receipt: 1 });
 * }
 * await store.fetch('order-42', now); // { receipt: 1 }
 * ```
 */
export class PgIdempotencyStore<T = unknown> implements LeasedIdempotencyStore<T> {
  readonly #db: AnyPgDatabase;
  readonly #queries: ReturnType<typeof prepareQueries>;
  readonly #onClose: (() => unknown) | undefined;
  #closed = false;

  /**
   * @param db - a drizzle PostgreSQL database; the store shares its connections
   * @param options - see {@link PgStoreOptions}
   * @throws {@link InvalidOptionError} for a schema name PostgreSQL cannot hold, or a `schema`
   * that is not the table's
   */
  constructor(db: AnyPgDatabase, options: PgStoreOptions = {}) {
    const { table, name, schema } = resolvePgTable(options);
    this.#db = db;
    this.#queries = prepareQueries(db, table, schema, name);
    this.#onClose = options.onClose;
  }

  /** The drizzle database the store runs on. */
  get db(): AnyPgDatabase {
    return this.#db;
  }

  #open(): ReturnType<typeof prepareQueries> {
    if (this.#closed) throw new StoreClosedError();
    return this.#queries;
  }

  /** {@inheritDoc IdempotencyStore.reserve} */
  async reserve(key: string, digest: string, expires: number): Promise<boolean> {
    assertKey(key);
    assertDigest(digest);
    assertTime(expires, 'expires');
    const rows = await this.#open().reserve({ id: key, fingerprint: digest, expires });
    return rows.length === 1;
  }

  /** {@inheritDoc LeasedIdempotencyStore.finish} */
  async finish(key: string, digest: string, response: T, attempt?: number): Promise<boolean> {
    assertKey(key);
    assertDigest(digest);
    if (attempt !== undefined) assertAttempt(attempt);
    const text = serializeResponse(response);
    const queries = this.#open();
    const rows =
      attempt === undefined
        ? await queries.finish({ id: key, fingerprint: digest, response: text })
        : await queries.finishFenced({ id: key, fingerprint: digest, response: text, attempt });
    return rows.length === 1;
  }

  /** {@inheritDoc LeasedIdempotencyStore.acquire} */
  async acquire(key: string, digest: string, options: AcquireOptions): Promise<AcquireResult<T>> {
    assertKey(key);
    assertDigest(digest);
    const leaseUntil = leaseDeadline(options);
    const queries = this.#open();
    const { expires, now } = options;
    // The statement either owns the row or leaves it as it was; what is there is then read. A row
    // deleted in between (released, purged) makes the key new again: try once more.
    for (;;) {
      const [won] = await queries.acquire({
        id: key,
        fingerprint: digest,
        expires,
        leaseUntil,
        now,
      });
      if (won !== undefined) return acquiredOutcome(won.attempt, leaseUntil);
      const [row] = await queries.get({ id: key });
      if (row !== undefined) return existingOutcome<T>(row, digest);
    }
  }

  /** {@inheritDoc LeasedIdempotencyStore.renew} */
  async renew(key: string, digest: string, attempt: number, leaseUntil: number): Promise<boolean> {
    assertKey(key);
    assertDigest(digest);
    assertAttempt(attempt);
    assertTime(leaseUntil, 'leaseUntil');
    const rows = await this.#open().renew({ id: key, fingerprint: digest, attempt, leaseUntil });
    return rows.length === 1;
  }

  /** {@inheritDoc LeasedIdempotencyStore.markUnrecorded} */
  async markUnrecorded(key: string, digest: string, attempt: number): Promise<boolean> {
    assertKey(key);
    assertDigest(digest);
    assertAttempt(attempt);
    const rows = await this.#open().markUnrecorded.execute({
      id: key,
      fingerprint: digest,
      attempt,
    });
    return rows.length === 1;
  }

  /** {@inheritDoc LeasedIdempotencyStore.pendingKeys} */
  async pendingKeys(options: PendingKeysOptions): Promise<PendingKey[]> {
    assertTime(options?.now, 'now');
    const limit = pendingLimit(options.limit);
    const queries = this.#open();
    const rows = options.stale
      ? await queries.stalePendingKeys.execute({ now: options.now, limit })
      : await queries.pendingKeys.execute({ limit });
    return rows.map((row) => toPendingKey(row, options.now));
  }

  /**
   * {@inheritDoc LeasedIdempotencyStore.releasePending}
   *
   * One conditional delete; when it deletes nothing, the row is read to say why.
   */
  async releasePending(key: string, fingerprint?: string): Promise<ReleasePendingResult> {
    assertKey(key);
    if (fingerprint !== undefined) assertDigest(fingerprint);
    const queries = this.#open();
    const deleted = await queries.releasePending.execute({
      id: key,
      fingerprint: fingerprint ?? null,
    });
    if (deleted.length === 1) return 'released';
    const [row] = await queries.get({ id: key });
    if (row === undefined) return 'missing';
    return row.status === KeyStatus.done ? 'done' : 'mismatch';
  }

  /** {@inheritDoc IdempotencyStore.fetch} */
  async fetch(key: string, now: number): Promise<T | null> {
    assertKey(key);
    assertTime(now, 'now');
    const [row] = await this.#open().fetch({ id: key, now });
    return row?.response == null ? null : parseResponse<T>(row.response);
  }

  /** {@inheritDoc IdempotencyStore.expired} */
  async expired(now: number, limit: number = DEFAULT_LIMIT): Promise<string[]> {
    assertLimit(limit);
    assertTime(now, 'now');
    const rows = await this.#open().expired.execute({ now, limit });
    return rows.map((row) => row.id);
  }

  /**
   * {@inheritDoc IdempotencyStore.purge}
   *
   * One statement, so one transaction: the lowest expired ids are locked with
   * `FOR UPDATE SKIP LOCKED`, deleted with the predicate repeated, and the ids actually deleted
   * are returned in byte order. Rows another purger holds are skipped, not waited for.
   */
  async purge(now: number, limit: number = DEFAULT_LIMIT): Promise<string[]> {
    assertLimit(limit);
    assertTime(now, 'now');
    const rows = await this.#open().purge.execute({ now, limit });
    return rows.map((row) => row.id).sort(compareKeys);
  }

  /** {@inheritDoc IdempotencyStore.counts} */
  async counts(): Promise<StatusCounts> {
    return countByStatus(await this.#open().counts.execute());
  }

  /** {@inheritDoc IdempotencyStore.sweepBatch} */
  async sweepBatch(now: number, batchSize: number): Promise<number> {
    assertIntegerOption(batchSize, 'batchSize', 1, MAX_BATCH_SIZE);
    assertTime(now, 'now');
    const rows = await this.#open().sweepBatch.execute({ now, limit: batchSize });
    return rows.length;
  }

  /** {@inheritDoc LeasedIdempotencyStore.stats} */
  async stats(now: number): Promise<LeaseStats> {
    assertTime(now, 'now');
    const rows = await this.#open().stats.execute({ now });
    const past = countByStatus(rows.map((row) => ({ status: row.status, count: row.past })));
    const pending = rows.find((row) => row.status === KeyStatus.pending);
    return {
      ...countByStatus(rows),
      expired: past.done,
      stalePending: past.pending,
      lapsed: Number(pending?.lapsed ?? 0),
      unrecorded: Number(pending?.unrecorded ?? 0),
    };
  }

  /** {@inheritDoc LeasedIdempotencyStore.release} */
  async release(key: string, digest: string, attempt?: number): Promise<boolean> {
    assertKey(key);
    assertDigest(digest);
    if (attempt !== undefined) assertAttempt(attempt);
    const queries = this.#open();
    const rows =
      attempt === undefined
        ? await queries.release({ id: key, fingerprint: digest })
        : await queries.releaseFenced({ id: key, fingerprint: digest, attempt });
    return rows.length === 1;
  }

  /** {@inheritDoc IdempotencyStore.get} */
  async get(key: string): Promise<IdempotencyRecord<T> | null> {
    assertKey(key);
    const [row] = await this.#open().get({ id: key });
    return row ? toRecord<T>(row) : null;
  }

  /** {@inheritDoc IdempotencyStore.retentionCycle} */
  async retentionCycle(key: string): Promise<boolean> {
    assertKey(key);
    const { first, purgeAt, second } = RETENTION_CYCLE;
    await this.reserve(key, first.digest, first.expires);
    await this.finish(key, first.digest, first.response as T);
    await this.purge(purgeAt);
    return this.reserve(key, second.digest, second.expires);
  }

  /** {@inheritDoc IdempotencyStore.close} */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    await this.#onClose?.();
  }
}
