import { createHash } from 'node:crypto';
import { and, asc, eq, gt, inArray, lte, sql } from 'drizzle-orm';
import type { PgDatabase, PgQueryResultHKT } from 'drizzle-orm/pg-core';
import { StoreClosedError } from '../core/errors.js';
import { parseResponse, serializeResponse } from '../core/json.js';
import { compareKeys } from '../core/order.js';
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
  return {
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
        .select()
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
export class PgIdempotencyStore<T = unknown> implements IdempotencyStore<T> {
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

  /** {@inheritDoc IdempotencyStore.finish} */
  async finish(key: string, digest: string, response: T): Promise<boolean> {
    assertKey(key);
    assertDigest(digest);
    const text = serializeResponse(response);
    const rows = await this.#open().finish({
      id: key,
      fingerprint: digest,
      response: text,
    });
    return rows.length === 1;
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

  /** {@inheritDoc IdempotencyStore.stats} */
  async stats(now: number): Promise<RetentionStats> {
    assertTime(now, 'now');
    const rows = await this.#open().stats.execute({ now });
    const past = countByStatus(rows.map((row) => ({ status: row.status, count: row.past })));
    return { ...countByStatus(rows), expired: past.done, stalePending: past.pending };
  }

  /** {@inheritDoc IdempotencyStore.release} */
  async release(key: string, digest: string): Promise<boolean> {
    assertKey(key);
    assertDigest(digest);
    const rows = await this.#open().release({ id: key, fingerprint: digest });
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
