import { createHash } from 'node:crypto';
import { and, asc, eq, gt, inArray, isNull, lte, or, sql } from 'drizzle-orm';
import type { PgDatabase, PgQueryResultHKT } from 'drizzle-orm/pg-core';
import { AsyncIdempotencyStore, type KeyStatements } from '../core/async-store.js';
import { expiredAnswer, leaseHolderRow, leaseTakeover, ownerRow } from '../core/key-conditions.js';
import { KeyStatus } from '../core/status.js';
import type { LeasedIdempotencyStore, ReleasePendingResult } from '../core/store.js';
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
  const isExpiredAnswer = expiredAnswer(keys, p('now'));
  const ownPending = ownerRow(keys, p('id'), p('fingerprint'));
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
  const ownedBy = leaseHolderRow(keys, p('id'), p('fingerprint'), p('attempt'));
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
    // One statement, so atomic: inserts a missing key with a fresh fencing token, or takes over a
    // pending row of the same fingerprint whose lease lapsed, raising its token (the conflicting
    // row is locked meanwhile, so of concurrent contenders one wins and the others see its new
    // lease); returns no row otherwise. A row without a lease (NULL) never compares as lapsed.
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
          attempt: sql`${p('token')}`,
          unrecorded: sql`false`,
        })
        .onConflictDoUpdate({ target: keys.id, ...leaseTakeover(keys, p('now')) })
        .returning({ attempt: keys.attempt }),
      ['id', 'fingerprint', 'expires', 'leaseUntil', 'token', 'now'],
    ),
    finishFenced: compilePgStatement(
      db,
      name('finish_fenced'),
      db
        .update(keys)
        .set({ status: KeyStatus.done, response: sql<string>`${p('response')}` })
        .where(ownerRow(keys, p('id'), p('fingerprint'), p('attempt')))
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
      .where(ownerRow(keys, p('id'), p('fingerprint'), p('attempt')))
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
    // Not prepared: each call is planned with its own `now`, so the planner, from the table's
    // statistics, walks the partial index of done rows in id order when the backlog is large (and
    // stops at `limit`) and sorts the retention index's range when it is small. A named statement
    // would settle on one generic plan, whose cost grows with the backlog or with the table.
    expired: db
      .select({ id: keys.id })
      .from(keys)
      .where(isExpiredAnswer)
      .orderBy(asc(keys.id))
      .limit(p('limit')),
    purge: deleteExpired(lockExpired('candidates', [asc(keys.id)])),
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

function pgStatements(
  queries: ReturnType<typeof prepareQueries>,
  onClose: (() => unknown) | undefined,
): KeyStatements {
  return {
    reserve: async (id, fingerprint, expires) =>
      (await queries.reserve({ id, fingerprint, expires })).length,
    finish: async (id, fingerprint, response) =>
      (await queries.finish({ id, fingerprint, response })).length,
    finishFenced: async (id, fingerprint, response, attempt) =>
      (await queries.finishFenced({ id, fingerprint, response, attempt })).length,
    release: async (id, fingerprint) => (await queries.release({ id, fingerprint })).length,
    releaseFenced: async (id, fingerprint, attempt) =>
      (await queries.releaseFenced({ id, fingerprint, attempt })).length,
    renew: async (id, fingerprint, attempt, leaseUntil) =>
      (await queries.renew({ id, fingerprint, attempt, leaseUntil })).length,
    markUnrecorded: async (id, fingerprint, attempt) =>
      (await queries.markUnrecorded.execute({ id, fingerprint, attempt })).length,
    // The statement either owns the row or leaves it as it was; what is there is then read.
    acquire: async (id, fingerprint, { expires, now, leaseUntil, token }) => {
      const [won] = await queries.acquire({ id, fingerprint, expires, leaseUntil, token, now });
      if (won !== undefined) return { attempt: won.attempt };
      const [row] = await queries.get({ id });
      return { row };
    },
    pendingKeys: ({ now, stale, limit }) =>
      stale
        ? queries.stalePendingKeys.execute({ now, limit })
        : queries.pendingKeys.execute({ limit }),
    releasePending: async (id, fingerprint) => {
      const deleted = await queries.releasePending.execute({
        id,
        fingerprint: fingerprint ?? null,
      });
      if (deleted.length === 1) return { released: true };
      const [row] = await queries.get({ id });
      return { released: false, row };
    },
    fetch: async (id, now) => (await queries.fetch({ id, now }))[0]?.response,
    get: async (id) => (await queries.get({ id }))[0],
    expired: (now, limit) => queries.expired.execute({ now, limit }),
    purge: (now, limit) => queries.purge.execute({ now, limit }),
    sweepBatch: async (now, limit) => (await queries.sweepBatch.execute({ now, limit })).length,
    counts: () => queries.counts.execute(),
    stats: (now) => queries.stats.execute({ now }),
    close: () => onClose?.(),
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
export class PgIdempotencyStore<T = unknown>
  extends AsyncIdempotencyStore<T>
  implements LeasedIdempotencyStore<T>
{
  readonly #db: AnyPgDatabase;

  /**
   * @param db - a drizzle PostgreSQL database; the store shares its connections
   * @param options - see {@link PgStoreOptions}
   * @throws {@link InvalidOptionError} for a schema name PostgreSQL cannot hold, or a `schema`
   * that is not the table's
   */
  constructor(db: AnyPgDatabase, options: PgStoreOptions = {}) {
    const { table, name, schema } = resolvePgTable(options);
    super(pgStatements(prepareQueries(db, table, schema, name), options.onClose));
    this.#db = db;
  }

  /** The drizzle database the store runs on. */
  get db(): AnyPgDatabase {
    return this.#db;
  }

  /**
   * {@inheritDoc LeasedIdempotencyStore.releasePending}
   *
   * One conditional delete; when it deletes nothing, the row is read to say why.
   */
  override releasePending(key: string, fingerprint?: string): Promise<ReleasePendingResult> {
    return super.releasePending(key, fingerprint);
  }

  /**
   * {@inheritDoc IdempotencyStore.purge}
   *
   * One statement, so one transaction: the lowest expired ids are locked with
   * `FOR UPDATE SKIP LOCKED`, deleted with the predicate repeated, and the ids actually deleted
   * are returned in byte order. Rows another purger holds are skipped, not waited for.
   */
  override purge(now: number, limit?: number): Promise<string[]> {
    return super.purge(now, limit);
  }
}
