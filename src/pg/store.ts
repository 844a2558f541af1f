import { createHash } from 'node:crypto';
import { and, asc, eq, gt, isNotNull, type SQL, sql } from 'drizzle-orm';
import { AsyncIdempotencyStore, type KeyStatements } from '../core/async-store.js';
import { assertDrizzleDatabase } from '../core/database-identity.js';
import type { DeploymentReport } from '../core/deployment.js';
import type { EncryptionOption } from '../core/encryption.js';
import { InvalidOptionError } from '../core/errors.js';
import {
  expiredAnswer,
  expiredAnswerReplacement,
  idStartsWith,
  leaseHolderRow,
  leaseTakeover,
  liveAnswer,
  ownerRow,
  releasablePending,
  stalePending,
  takeoverToken,
} from '../core/key-conditions.js';
import type { KeyRow } from '../core/record.js';
import { primaryOf, replicasOf } from '../core/replicas.js';
import { KeyStatus } from '../core/status.js';
import type { LeasedIdempotencyStore, ReleasePendingResult } from '../core/store.js';
import { batchedPgStatements, batchingPgStatements, type PgBatchStats } from './batch.js';
import { type AnyPgDatabase, PG_DATABASE } from './client.js';
import {
  compilePgStatement,
  type PgQuery,
  type PgStatementMode,
  preparePgQuery,
} from './compile.js';
import { checkPgDeployment } from './deployment.js';
import { keyRowColumns, type PgKeysTable, type PgTableOptions, resolvePgTable } from './schema.js';

/** Options of {@link PgIdempotencyStore}. */
export interface PgStoreOptions extends PgTableOptions, EncryptionOption {
  /**
   * Called once by `close()`, e.g. to end a pool the store owns. By default `close()` leaves the
   * connection alone: a store built over your database never ends your pool.
   */
  readonly onClose?: () => unknown;
  /**
   * Where `fetch` reads a stored answer when `db` was made by drizzle's `withReplicas`:
   * `'primary'` (the default) or `'replica'`. A replica lags the primary, so an answer finished a
   * moment ago may not be there yet: a miss on the replica is read again on the primary, and a
   * finished request is never reported missing because of the lag. Every statement that decides
   * or writes (acquire, finish, release, purge, sweep, …) runs on the primary either way.
   */
  readonly replays?: 'primary' | 'replica';
  /**
   * `false` sends every statement unnamed (parsed on each call) instead of as a named prepared
   * statement: what a transaction pooler needs (PgBouncer in `pool_mode = transaction`, the pooled
   * endpoints of Supabase and Neon), as postgres-js users know it from its own `prepare: false`.
   * Default `true`. Named statements stay correct behind such a pooler: their names are unique
   * per process and client connection, and the first statement the server refuses by name is sent
   * again unnamed, after which the store names no statement more; `false` saves that first refusal.
   */
  readonly prepare?: boolean;
  /**
   * `true` batches the requests in flight at the same moment: the claims (`acquire`), fenced
   * finishes, replay reads (`fetch`) and row reads called in one turn of the event loop go to the
   * server as one statement per kind over arrays (one round trip, one commit), and each caller
   * still gets exactly its own answer. A call waits up to one turn for its batch. Every guarantee
   * holds unchanged; see docs/store.md, "Batching on PostgreSQL". Default `false`.
   */
  readonly batch?: boolean;
}

const p = sql.placeholder;

// Named statements are kept per connection by name, and node-postgres refuses one name for two
// texts: the schema and the table are part of the text, so they are part of the name too. The
// compiler adds a tag of the process and the connection (see compilePgStatement); the whole name
// stays under PostgreSQL's 63 bytes.
function statementNames(schema: string, table: string): (operation: string) => string {
  const tag = createHash('sha256').update(`${schema}.${table}`).digest('hex').slice(0, 12);
  return (operation) => `idempotency_${tag}_${operation}`;
}

function prepareQueries(
  db: AnyPgDatabase,
  keys: PgKeysTable,
  schema: string,
  table: string,
  mode: PgStatementMode,
) {
  const name = statementNames(schema, table);
  const compile = <K extends string, R>(
    operation: string,
    query: PgQuery<R>,
    names: readonly K[],
  ) => compilePgStatement(db, name(operation), query, names, mode);
  const prepare = <R>(operation: string, query: PgQuery<R>) =>
    preparePgQuery(name(operation), query, mode);
  const isExpiredAnswer = expiredAnswer(keys, p('now'));
  const ownPending = ownerRow(keys, p('id'), p('fingerprint'));
  // One statement is one transaction: the candidates are locked with FOR UPDATE SKIP LOCKED, so
  // parallel purgers on other connections skip them and take disjoint batches, and the delete
  // repeats the predicate so a row that stopped being an expired answer is never deleted.
  // RETURNING reports what was deleted, not what was selected.
  // The delete finds the candidates by their tuple ids (a TID scan: one heap page each) instead of
  // descending an index once per id, which cost four pages a row. A locked row cannot move before
  // the statement commits; a tuple id that no longer names the row matches no row (the repeated
  // predicate is checked on the current version), so nothing else can be deleted.
  const deleteExpired = (candidates: ReturnType<typeof lockExpired>) =>
    db
      .with(candidates)
      .delete(keys)
      .where(
        and(sql`ctid = any(array(select ${candidates.ctid} from ${candidates}))`, isExpiredAnswer),
      )
      .returning({ id: keys.id });
  const lockExpired = (alias: string, order: ReturnType<typeof asc>[], among?: SQL) =>
    db.$with(alias).as(
      db
        .select({ id: keys.id, ctid: sql<string>`ctid`.as('ctid') })
        .from(keys)
        .where(among === undefined ? isExpiredAnswer : and(among, isExpiredAnswer))
        .orderBy(...order)
        .limit(p('limit'))
        .for('update', { skipLocked: true }),
    );
  const fetchWhere = liveAnswer(keys, p('id'), p('now'));
  const isPending = eq(keys.status, KeyStatus.pending);
  const isDone = eq(keys.status, KeyStatus.done);
  const ownedBy = leaseHolderRow(keys, p('id'), p('fingerprint'), p('attempt'));
  const rowColumns = keyRowColumns(keys);
  const leasedRow = {
    id: p('id'),
    fingerprint: p('fingerprint'),
    status: KeyStatus.pending,
    expires: p('expires'),
    leaseUntil: p('leaseUntil'),
    attempt: sql`${p('token')}`,
    unrecorded: sql`false`,
  };
  const inserted = db
    .$with('inserted')
    .as(
      db.insert(keys).values(leasedRow).onConflictDoNothing().returning({ attempt: keys.attempt }),
    );
  const pendingList = (where: ReturnType<typeof and>) =>
    db.select(rowColumns).from(keys).where(where).orderBy(asc(keys.id)).limit(p('limit'));
  return {
    // One statement, so atomic: inserts a missing key with a fresh fencing token, or takes over a
    // pending row of the same fingerprint whose lease lapsed, raising its token (the conflicting
    // row is locked meanwhile, so of concurrent contenders one wins and the others see its new
    // lease); returns no row otherwise. A row without a lease (NULL) never compares as lapsed.
    acquire: compile(
      'acquire',
      db
        .insert(keys)
        .values(leasedRow)
        .onConflictDoUpdate({ target: keys.id, ...leaseTakeover(keys, p('now')) })
        .returning({ attempt: keys.attempt }),
      ['id', 'fingerprint', 'expires', 'leaseUntil', 'token', 'now'],
    ),
    // A fresh key in one round trip, and an existing row left as it was: DO NOTHING neither locks
    // nor writes the row it meets (a DO UPDATE would, even with a false WHERE, stamping the row's
    // xmax on every replay). The statement's one snapshot does not see the row it inserts, so the
    // join reads only a row that was there before; a row another transaction committed after the
    // snapshot blocks the insert and is not read either, and the claim then decides it.
    insertOrGet: compile(
      'insert_or_get',
      db
        .with(inserted)
        .select({
          inserted_attempt: sql<number | null>`(select ${inserted.attempt} from ${inserted})`.as(
            'inserted_attempt',
          ),
          ...rowColumns,
        })
        .from(sql`(select 1) as one`)
        .leftJoin(keys, eq(keys.id, p('id'))),
      ['id', 'fingerprint', 'expires', 'leaseUntil', 'token'],
    ),
    // One statement: the expired answer of the key becomes this caller's pending row, its token
    // raised. The row is locked by the update, so of concurrent claims one wins and the others
    // find it pending; a sweep's delete rechecks its predicate on the new version and leaves it.
    replaceExpired: compile(
      'replace_expired',
      db
        .update(keys)
        .set({
          ...expiredAnswerReplacement({
            fingerprint: p('fingerprint'),
            expires: p('expires'),
            leaseUntil: p('leaseUntil'),
          }),
          attempt: takeoverToken(keys, sql`${p('token')}`),
        })
        .where(and(eq(keys.id, p('id')), isExpiredAnswer))
        .returning({ attempt: keys.attempt }),
      ['id', 'fingerprint', 'expires', 'leaseUntil', 'token', 'now'],
    ),
    finishFenced: compile(
      'finish_fenced',
      db
        .update(keys)
        .set({ status: KeyStatus.done, response: sql<string>`${p('response')}` })
        .where(ownerRow(keys, p('id'), p('fingerprint'), p('attempt')))
        .returning({ id: keys.id }),
      ['id', 'fingerprint', 'response', 'attempt'],
    ),
    renew: compile(
      'renew',
      db
        .update(keys)
        .set({ leaseUntil: sql`${p('leaseUntil')}` })
        .where(ownedBy)
        .returning({ id: keys.id }),
      ['id', 'fingerprint', 'attempt', 'leaseUntil'],
    ),
    releaseFenced: compile(
      'release_fenced',
      db.delete(keys).where(ownedBy).returning({ id: keys.id }),
      ['id', 'fingerprint', 'attempt'],
    ),
    markUnrecorded: prepare(
      'mark_unrecorded',
      db
        .update(keys)
        .set({ unrecorded: true, leaseUntil: null })
        .where(ownerRow(keys, p('id'), p('fingerprint'), p('attempt')))
        .returning({ id: keys.id }),
    ),
    pendingKeys: prepare(
      'pending_keys',
      pendingList(and(isPending, idStartsWith(keys, p('prefix')))),
    ),
    stalePendingKeys: prepare(
      'stale_pending_keys',
      pendingList(and(isPending, idStartsWith(keys, p('prefix')), stalePending(keys, p('now')))),
    ),
    // The operator's release: whatever the lease and the attempt.
    releasePending: prepare(
      'release_pending',
      db
        .delete(keys)
        .where(releasablePending(keys, p('id'), sql`${p('fingerprint')}::text`))
        .returning({ id: keys.id }),
    ),
    // The per-request operations skip drizzle's per-call work where the driver allows it (see
    // compilePgStatement); drizzle still writes their SQL.
    reserve: compile(
      'reserve',
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
    finish: compile(
      'finish',
      db
        .update(keys)
        .set({ status: KeyStatus.done, response: sql<string>`${p('response')}` })
        .where(ownPending)
        .returning({ id: keys.id }),
      ['id', 'fingerprint', 'response'],
    ),
    fetch: compile('fetch', db.select({ response: keys.response }).from(keys).where(fetchWhere), [
      'id',
      'now',
    ]),
    release: compile('release', db.delete(keys).where(ownPending).returning({ id: keys.id }), [
      'id',
      'fingerprint',
    ]),
    get: compile(
      'get',
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
    // How many expired answers there are, counting no further than `cap`: the start of the
    // retention index's range, so it costs at most `cap` entries whatever the backlog. Not
    // prepared: a generic plan, not knowing `now`, guessed a third of the table expired and chose
    // a sequential scan stopping at `cap`, which read a whole 130k-row table for a 1,000-row
    // backlog.
    backlogUpTo: db.select({ count: sql<number>`count(*)::int`.mapWith(Number) }).from(
      db
        .select({ one: sql`1`.as('one') })
        .from(keys)
        .where(isExpiredAnswer)
        .limit(p('cap'))
        .as('backlog'),
    ),
    // The purge of a backlog known to be under `cap`: the whole backlog, read from the start of the
    // retention index range (at most `cap` rows, however the statistics misjudge it), sorted by
    // id in memory. Not prepared, as `purge`: each call is planned with its own `now` and `cap`.
    purgeSmallBacklog: deleteExpired(
      lockExpired(
        'candidates',
        [asc(keys.id)],
        sql`ctid = any(array(${db
          .select({ ctid: sql`ctid` })
          .from(keys)
          .where(isExpiredAnswer)
          .orderBy(asc(keys.expires), asc(keys.id))
          .limit(p('cap'))}))`,
      ),
    ),
    // Index order (expires, id): each batch reads the start of the retention index range instead
    // of sorting the whole backlog, so a sweep stays linear in it.
    sweepBatch: prepare(
      'sweep_batch',
      deleteExpired(lockExpired('batch', [asc(keys.expires), asc(keys.id)])),
    ),
    // A scope's answers, lowest ids first, locked (SKIP LOCKED) and deleted by one statement; the
    // condition is repeated on the current version of each row.
    eraseBatch: prepare(
      'erase_batch',
      db
        .delete(keys)
        .where(
          and(
            sql`${keys.id} = any(array(${db
              .select({ id: keys.id })
              .from(keys)
              .where(and(isDone, idStartsWith(keys, sql`${p('prefix')}::text`)))
              .orderBy(asc(keys.id))
              .limit(p('limit'))
              .for('update', { skipLocked: true })}))`,
            isDone,
            idStartsWith(keys, sql`${p('prefix')}::text`),
          ),
        )
        .returning({ id: keys.id }),
    ),
    answers: prepare(
      'answers',
      db
        .select({ id: keys.id, response: keys.response })
        .from(keys)
        .where(and(isDone, gt(keys.id, sql`${p('after')}::text`)))
        .orderBy(asc(keys.id))
        .limit(p('limit')),
    ),
    reseal: prepare(
      'reseal',
      db
        .update(keys)
        .set({ response: sql<string>`${p('response')}::text` })
        .where(and(eq(keys.id, p('id')), isDone, sql`${keys.response} = ${p('previous')}::text`))
        .returning({ id: keys.id }),
    ),
    stepRecords: prepare(
      'stepRecords',
      db
        .select({ id: keys.id, steps: keys.steps })
        .from(keys)
        .where(and(isNotNull(keys.steps), gt(keys.id, sql`${p('after')}::text`)))
        .orderBy(asc(keys.id))
        .limit(p('limit')),
    ),
    resealSteps: prepare(
      'resealSteps',
      db
        .update(keys)
        .set({ steps: sql<string>`${p('steps')}::text` })
        .where(and(eq(keys.id, p('id')), sql`${keys.steps} = ${p('previous')}::text`))
        .returning({ id: keys.id }),
    ),
    counts: prepare(
      'counts',
      db
        .select({ status: keys.status, count: sql<string>`count(*)` })
        .from(keys)
        .groupBy(keys.status),
    ),
    stats: prepare(
      'stats',
      db
        .select({
          status: keys.status,
          count: sql<string>`count(*)`,
          past: sql<string>`count(*) filter (where ${keys.expires} <= ${p('now')})`,
          lapsed: sql<string>`count(*) filter (where not ${keys.unrecorded} and ${keys.leaseUntil} <= ${p('now')})`,
          unrecorded: sql<string>`count(*) filter (where ${keys.unrecorded})`,
        })
        .from(keys)
        .groupBy(keys.status),
    ),
  };
}

// The answer of a done row, read on one replica: a statement of its own per replica database.
function replicaFetch(
  replica: AnyPgDatabase,
  keys: PgKeysTable,
  schema: string,
  table: string,
  mode: PgStatementMode,
) {
  return compilePgStatement(
    replica,
    statementNames(schema, table)('fetch_replica'),
    replica
      .select({ response: keys.response })
      .from(keys)
      .where(liveAnswer(keys, p('id'), p('now'))),
    ['id', 'now'],
    mode,
  );
}

// Under this many expired answers per id asked for, the purge sorts the whole backlog instead of
// leaving the plan to the planner. The planner judges the backlog from the histogram of `expires`,
// and a backlog far smaller than one bucket of it (1,000 expired rows in 10M) looks large: it then
// walks the done rows in id order, passing about done rows ÷ backlog entries per expired one,
// a second per purge in that table. Counting up to the cap first is cheap and never misjudges.
// A backlog that grows past the cap between the count and the purge (rows finished meanwhile) is
// purged from its `cap` earliest deadlines, lowest ids first among them: still expired answers
// only.
const SORTED_BACKLOG_PER_ID = 20;

function pgStatements(
  queries: ReturnType<typeof prepareQueries>,
  replicas: readonly ReturnType<typeof replicaFetch>[],
  onClose: (() => unknown) | undefined,
): KeyStatements {
  const fetchPrimary = async (id: string, now: number) =>
    (await queries.fetch({ id, now }))[0]?.response;
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
    insertOrGet: async (id, fingerprint, { expires, leaseUntil, token }) => {
      const [found] = await queries.insertOrGet({ id, fingerprint, expires, leaseUntil, token });
      if (found === undefined) throw new Error('the insert-or-read of acquire answered no row');
      const { inserted_attempt: attempt, ...row } = found;
      if (attempt !== null) return { attempt };
      return { row: row.id === null ? undefined : (row as KeyRow) };
    },
    replaceExpired: async (id, fingerprint, { expires, now, leaseUntil, token }) =>
      (await queries.replaceExpired({ id, fingerprint, expires, leaseUntil, token, now }))[0]
        ?.attempt,
    // The statement either owns the row or leaves it as it was; what is there is then read.
    acquire: async (id, fingerprint, { expires, now, leaseUntil, token }) => {
      const [won] = await queries.acquire({ id, fingerprint, expires, leaseUntil, token, now });
      if (won !== undefined) return { attempt: won.attempt };
      const [row] = await queries.get({ id });
      return { row };
    },
    pendingKeys: ({ now, stale, limit, prefix }) =>
      stale
        ? queries.stalePendingKeys.execute({ now, limit, prefix })
        : queries.pendingKeys.execute({ limit, prefix }),
    releasePending: async (id, fingerprint) => {
      const deleted = await queries.releasePending.execute({
        id,
        fingerprint: fingerprint ?? null,
      });
      if (deleted.length === 1) return { released: true };
      const [row] = await queries.get({ id });
      return { released: false, row };
    },
    fetch:
      replicas.length === 0
        ? fetchPrimary
        : async (id, now) => {
            const replica = replicas[
              Math.floor(Math.random() * replicas.length)
            ] as (typeof replicas)[number];
            return (await replica({ id, now }))[0]?.response ?? fetchPrimary(id, now);
          },
    get: async (id) => (await queries.get({ id }))[0],
    expired: (now, limit) => queries.expired.execute({ now, limit }),
    purge: async (now, limit) => {
      const cap = limit * SORTED_BACKLOG_PER_ID;
      const [backlog] = await queries.backlogUpTo.execute({ now, cap });
      return (backlog?.count ?? cap) < cap
        ? queries.purgeSmallBacklog.execute({ now, limit, cap })
        : queries.purge.execute({ now, limit });
    },
    sweepBatch: async (now, limit) => (await queries.sweepBatch.execute({ now, limit })).length,
    eraseBatch: (prefix, limit) => queries.eraseBatch.execute({ prefix, limit }),
    answers: (after, limit) => queries.answers.execute({ after, limit }),
    reseal: async (id, previous, response) =>
      (await queries.reseal.execute({ id, previous, response })).length,
    stepRecords: (after, limit) => queries.stepRecords.execute({ after, limit }),
    resealSteps: async (id, previous, steps) =>
      (await queries.resealSteps.execute({ id, previous, steps })).length,
    counts: () => queries.counts.execute(),
    stats: (now) => queries.stats.execute({ now }),
    close: () => onClose?.(),
  };
}

/**
 * The idempotency store on PostgreSQL, over any drizzle PostgreSQL database (a node-postgres
 * `Pool` is the usual one; PGlite works too). Every operation is one statement (named and prepared
 * unless `prepare: false`), so it is one round trip and atomic on its own; `purge` reads a capped
 * count of its backlog first to choose its plan. The table must exist: use `openPgStore`, or
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
 * const db = drizzle({ client: new Pool({ connectionString: process.env.DATABASE_URL }) });
 * await applyPgMigrations(db);
 * const store = new PgIdempotencyStore<{ receipt: number }>(db);
 * if (await store.reserve('order-42', fingerprint, now + 86_400)) {
 *   await store.finish('order-42', fingerprint, { receipt: 1 });
 * }
 * await store.fetch('order-42', now); // { receipt: 1 }
 * ```
 */
export class PgIdempotencyStore<T = unknown>
  extends AsyncIdempotencyStore<T>
  implements LeasedIdempotencyStore<T>
{
  readonly #db: AnyPgDatabase;
  readonly #table: PgKeysTable;
  readonly #options: PgStoreOptions;
  readonly #batchStats: (() => PgBatchStats) | undefined;

  /**
   * @param db - a drizzle PostgreSQL database; the store shares its connections
   * @param options - see {@link PgStoreOptions}
   * @throws {@link InvalidOptionError} for a schema name PostgreSQL cannot hold, a `schema`
   * that is not the table's, a `replays` other than `'primary'` or `'replica'`, or a `batch`
   * that is not a boolean
   * @throws {@link UnrecognisedDatabaseError} when `db` is not a drizzle PostgreSQL database (or
   * transaction) over a client of a PostgreSQL driver
   */
  constructor(db: AnyPgDatabase, options: PgStoreOptions = {}) {
    const { table, name, schema } = resolvePgTable(options);
    if (
      options.replays !== undefined &&
      options.replays !== 'primary' &&
      options.replays !== 'replica'
    ) {
      throw new InvalidOptionError(
        `replays must be 'primary' or 'replica', got ${String(options.replays)}`,
      );
    }
    if (options.batch !== undefined && typeof options.batch !== 'boolean') {
      throw new InvalidOptionError(`batch must be a boolean, got ${typeof options.batch}`);
    }
    const mode: PgStatementMode = { named: options.prepare ?? true };
    const primary = primaryOf(db);
    assertDrizzleDatabase(primary, PG_DATABASE);
    const replicas =
      options.replays === 'replica'
        ? replicasOf(db).map((replica) => replicaFetch(replica, table, schema, name, mode))
        : [];
    const single = pgStatements(
      prepareQueries(primary, table, schema, name, mode),
      replicas,
      options.onClose,
    );
    const batching =
      options.batch === true
        ? batchingPgStatements(
            single,
            batchedPgStatements(primary, table, statementNames(schema, name), mode),
            replicas.length === 0,
          )
        : undefined;
    super(batching?.statements ?? single, options.encryption);
    this.#batchStats = batching?.stats;
    this.#db = primary;
    this.#table = table;
    this.#options = options;
  }

  /**
   * Reads what the server says about this store's deployment, without writing: see
   * `checkPgDeployment` for what is refused and what is warned about. `openPgStore` runs it at
   * open; call it on demand (a health check, after a failover).
   *
   * @example
   * ```ts
   * const { findings } = await store.checkDeployment();
   * for (const finding of findings) console.warn(`${finding.code}: ${finding.message} ${finding.fix}`);
   * ```
   */
  checkDeployment(): Promise<DeploymentReport> {
    return checkPgDeployment(this.#db, this.#options);
  }

  /**
   * How the store's batches were sized so far, per batched statement (see the `batch` option):
   * how many calls, how many statements, and how many statements carried each number of calls.
   * `undefined` on a store opened without `batch: true`.
   *
   * @example
   * ```ts
   * const { claims } = store.batchStats() ?? {};
   * console.log(claims?.sizes); // { 1: 12, 32: 40 }: 40 statements carried 32 claims each
   * ```
   */
  batchStats(): PgBatchStats | undefined {
    return this.#batchStats?.();
  }

  /** The drizzle database the store runs on: the primary of a `withReplicas` database. */
  get db(): AnyPgDatabase {
    return this.#db;
  }

  /** The keys table the store keeps its rows in (its schema and name); `pgTransaction` records there. */
  get table(): PgKeysTable {
    return this.#table;
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
   * A count of the backlog, capped at 20 × `limit`, chooses the plan; then one statement, so one
   * transaction: the lowest expired ids are locked with `FOR UPDATE SKIP LOCKED`, deleted with the
   * predicate repeated, and the ids actually deleted are returned in byte order. Rows another
   * purger holds are skipped, not waited for.
   */
  override purge(now: number, limit?: number): Promise<string[]> {
    return super.purge(now, limit);
  }
}
