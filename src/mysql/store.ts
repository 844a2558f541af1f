import { and, asc, eq, gt, inArray, isNotNull, lte, type SQL, sql } from 'drizzle-orm';
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
  liveAnswer,
  ownerRow,
  stalePending,
  takeoverToken,
} from '../core/key-conditions.js';
import type { KeyRow } from '../core/record.js';
import { primaryOf } from '../core/replicas.js';
import { KeyStatus } from '../core/status.js';
import type { AcquireOptions, AcquireResult, LeasedIdempotencyStore } from '../core/store.js';
import { retentionIndexName } from '../core/table-name.js';
import {
  batchedMysqlStatements,
  batchingMysqlStatements,
  keyRowOf,
  type MysqlBatchStats,
} from './batch.js';
import { type AnyMysqlDatabase, MYSQL_DATABASE } from './client.js';
import { compileMysqlStatement, type WriteHeader, writeHeader } from './compile.js';
import { checkMysqlDeployment } from './deployment.js';
import { ER_DUP_ENTRY, mysqlErrno, retryDeadlocks } from './errors.js';
import {
  MYSQL_MAX_TEXT_BYTES,
  type MysqlKeysTable,
  type MysqlTableOptions,
  resolveMysqlTable,
} from './schema.js';

/** Options of {@link MysqlIdempotencyStore}. */
export interface MysqlStoreOptions extends MysqlTableOptions, EncryptionOption {
  /**
   * Called once by `close()`, e.g. to end a pool the store owns. By default `close()` leaves the
   * connection alone: a store built over your database never ends your pool.
   */
  readonly onClose?: () => unknown;
  /**
   * `true` when the server is Vitess (PlanetScale): the purge and the sweep then lock their
   * candidates with a plain `FOR UPDATE`, without `SKIP LOCKED`, and read without `FORCE INDEX`,
   * neither of which Vitess accepts. Parallel purgers then wait for each other's rows instead of
   * skipping them. Default `false`.
   */
  readonly vitess?: boolean;
  /**
   * `true` batches the requests in flight at the same moment: the claims (`acquire`), fenced
   * finishes, replay reads (`fetch`) and row reads called in one turn of the event loop go to the
   * server as one statement per kind (a multi-row INSERT, one UPDATE in a short transaction, one
   * SELECT), and each caller still gets exactly its own answer. A call waits up to one turn for
   * its batch. Every guarantee holds unchanged; see docs/store.md, "Batching on MySQL".
   * Default `false`.
   */
  readonly batch?: boolean;
}

const p = sql.placeholder;

// drizzle answers a write with the driver's own shape (mysql2's [header, fields], PlanetScale's
// executed query).
function affected(result: unknown): number {
  return writeHeader(result).affectedRows;
}

function prepareQueries(db: AnyMysqlDatabase, keys: MysqlKeysTable) {
  const ownPending = ownerRow(keys, p('id'), p('fingerprint'));
  return {
    // A plain INSERT, never INSERT IGNORE (which also turns truncations and other errors into
    // warnings): a duplicate key fails with ER_DUP_ENTRY and nothing else is swallowed.
    // The per-request operations skip drizzle's per-call work where the driver allows it (see
    // compileMysqlStatement); drizzle still writes their SQL.
    reserve: compileMysqlStatement<'id' | 'fingerprint' | 'expires', WriteHeader>(
      db,
      db.insert(keys).values({
        id: sql`${p('id')}`,
        fingerprint: sql`${p('fingerprint')}`,
        status: KeyStatus.pending,
        expires: sql`${p('expires')}`,
      }),
      ['id', 'fingerprint', 'expires'],
      'header',
    ),
    finish: compileMysqlStatement<'id' | 'fingerprint' | 'response', WriteHeader>(
      db,
      db
        .update(keys)
        .set({ status: KeyStatus.done, response: sql`${p('response')}` })
        .where(ownPending),
      ['id', 'fingerprint', 'response'],
      'header',
    ),
    release: compileMysqlStatement<'id' | 'fingerprint', WriteHeader>(
      db,
      db.delete(keys).where(ownPending),
      ['id', 'fingerprint'],
      'header',
    ),
    fetch: compileMysqlStatement<'id' | 'now', { response: string | null }[]>(
      db,
      db
        .select({ response: keys.response })
        .from(keys)
        .where(liveAnswer(keys, p('id'), p('now'))),
      ['id', 'now'],
      'rows',
    ),
    // The fenced writes of a lease owner: each also requires the owner's fencing token.
    finishFenced: compileMysqlStatement<'id' | 'fingerprint' | 'response' | 'attempt', WriteHeader>(
      db,
      db
        .update(keys)
        .set({ status: KeyStatus.done, response: sql`${p('response')}` })
        .where(ownerRow(keys, p('id'), p('fingerprint'), p('attempt'))),
      ['id', 'fingerprint', 'response', 'attempt'],
      'header',
    ),
    releaseFenced: compileMysqlStatement<'id' | 'fingerprint' | 'attempt', WriteHeader>(
      db,
      db.delete(keys).where(leaseHolderRow(keys, p('id'), p('fingerprint'), p('attempt'))),
      ['id', 'fingerprint', 'attempt'],
      'header',
    ),
    renew: compileMysqlStatement<'id' | 'fingerprint' | 'attempt' | 'leaseUntil', WriteHeader>(
      db,
      db
        .update(keys)
        .set({ leaseUntil: sql`${p('leaseUntil')}` })
        .where(leaseHolderRow(keys, p('id'), p('fingerprint'), p('attempt'))),
      ['id', 'fingerprint', 'attempt', 'leaseUntil'],
      'header',
    ),
    markUnrecorded: db
      .update(keys)
      .set({ unrecorded: true, leaseUntil: null })
      .where(ownerRow(keys, p('id'), p('fingerprint'), p('attempt')))
      .prepare(),
    acquireInsert: compileMysqlStatement<
      'id' | 'fingerprint' | 'expires' | 'leaseUntil' | 'token',
      WriteHeader
    >(
      db,
      db.insert(keys).values({
        id: sql`${p('id')}`,
        fingerprint: sql`${p('fingerprint')}`,
        status: KeyStatus.pending,
        expires: sql`${p('expires')}`,
        leaseUntil: sql`${p('leaseUntil')}`,
        attempt: sql`${p('token')}`,
      }),
      ['id', 'fingerprint', 'expires', 'leaseUntil', 'token'],
      'header',
    ),
    // One conditional UPDATE takes over a lapsed lease: of concurrent contenders the first sets a
    // live lease and the others no longer match. The new fencing token is above the old and the
    // fresh one (see takeoverToken); LAST_INSERT_ID(expr) hands it back in the statement's own
    // answer (its insertId), so no second read can see another owner's.
    takeOver: compileMysqlStatement<
      'id' | 'fingerprint' | 'expires' | 'leaseUntil' | 'token' | 'now',
      WriteHeader
    >(
      db,
      db
        .update(keys)
        .set({
          attempt: sql`LAST_INSERT_ID(${takeoverToken(keys, sql`${p('token')}`)})`,
          leaseUntil: sql`${p('leaseUntil')}`,
          expires: sql`${p('expires')}`,
        })
        .where(
          and(
            ownPending,
            eq(keys.unrecorded, false),
            isNotNull(keys.leaseUntil),
            lte(keys.leaseUntil, p('now')),
          ),
        ),
      ['id', 'fingerprint', 'expires', 'leaseUntil', 'token', 'now'],
      'header',
    ),
    // One conditional UPDATE replaces the key's expired answer with this caller's pending row: of
    // concurrent claims the first matches and the others find it pending; a sweep's delete no
    // longer matches it either. The token comes back through LAST_INSERT_ID, as in takeOver.
    replaceExpired: compileMysqlStatement<
      'id' | 'fingerprint' | 'expires' | 'leaseUntil' | 'token' | 'now',
      WriteHeader
    >(
      db,
      db
        .update(keys)
        .set({
          ...expiredAnswerReplacement({
            fingerprint: p('fingerprint'),
            expires: p('expires'),
            leaseUntil: p('leaseUntil'),
          }),
          attempt: sql`LAST_INSERT_ID(${takeoverToken(keys, sql`${p('token')}`)})`,
        })
        .where(and(eq(keys.id, p('id')), expiredAnswer(keys, p('now')))),
      ['id', 'fingerprint', 'expires', 'leaseUntil', 'token', 'now'],
      'header',
    ),
    get: db
      .select()
      .from(keys)
      .where(eq(keys.id, p('id')))
      .prepare(),
    releasePending: db
      .delete(keys)
      .where(and(eq(keys.id, p('id')), eq(keys.status, KeyStatus.pending)))
      .prepare(),
    releasePendingOf: db.delete(keys).where(ownPending).prepare(),
    expired: db
      .select({ id: keys.id })
      .from(keys)
      .where(expiredAnswer(keys, p('now')))
      .orderBy(asc(keys.id))
      .limit(p('limit'))
      .prepare(),
    counts: db
      .select({ status: keys.status, count: sql<number>`count(*)` })
      .from(keys)
      .groupBy(keys.status)
      .prepare(),
    stats: db
      .select({
        status: keys.status,
        count: sql<number>`count(*)`,
        past: sql<string>`sum(${keys.expires} <= ${p('now')})`,
        lapsed: sql<string>`sum(${keys.leaseUntil} <= ${p('now')})`,
        unrecorded: sql<string>`sum(${keys.unrecorded})`,
      })
      .from(keys)
      .groupBy(keys.status)
      .prepare(),
  };
}

interface MysqlContext {
  readonly db: AnyMysqlDatabase;
  readonly table: MysqlKeysTable;
  readonly retentionIndex: string;
  readonly onClose: (() => unknown) | undefined;
  readonly vitess: boolean;
}

// Locks up to `limit` expired answers (skipping rows other transactions hold), deletes them with
// the predicate repeated, and returns their ids: one READ COMMITTED transaction, retried whole
// if it is a deadlock victim. On Galera, SKIP LOCKED sees only its own node's locks, so sweepers
// on several nodes pick the same batch and all but one fail certification at commit (1213):
// they back off at random and take the next batch, the rows they lost being already deleted.
const RETENTION_RETRY = { attempts: 20, backoffMs: 5 };

function deleteExpired(
  context: MysqlContext,
  now: number,
  limit: number,
  order: 'id' | 'index',
): Promise<{ id: string }[]> {
  return deleteLocked(context, expiredAnswer(context.table, now), limit, order);
}

// The same transaction for any condition on done rows: an expiry, or a scope being erased.
function deleteLocked(
  { db, table: keys, retentionIndex, vitess }: MysqlContext,
  condition: SQL,
  limit: number,
  order: 'id' | 'index',
): Promise<{ id: string }[]> {
  const orderBy: SQL[] = order === 'id' ? [asc(keys.id)] : [asc(keys.expires), asc(keys.id)];
  return retryDeadlocks(
    () =>
      db.transaction(
        async (tx) => {
          const candidates = await tx
            .select({ id: keys.id })
            // Index order reads the start of the retention index range and stops after `limit`
            // rows: no batch sorts the backlog, so a sweep stays linear in it.
            .from(keys, order === 'index' && !vitess ? { forceIndex: retentionIndex } : undefined)
            .where(condition)
            .orderBy(...orderBy)
            .limit(limit)
            .for('update', vitess ? undefined : { skipLocked: true });
          if (candidates.length === 0) return candidates;
          const ids = candidates.map((row) => row.id);
          const result = await tx.delete(keys).where(and(inArray(keys.id, ids), condition));
          if (affected(result) !== ids.length) {
            throw new Error(
              `purge locked ${ids.length} rows but deleted ${affected(result)}: rolled back`,
            );
          }
          return candidates;
        },
        { isolationLevel: 'read committed' },
      ),
    RETENTION_RETRY,
  );
}

async function readRow(
  queries: ReturnType<typeof prepareQueries>,
  id: string,
): Promise<KeyRow | undefined> {
  const [row] = await queries.get.execute({ id });
  return keyRowOf(row);
}

function mysqlStatements(
  context: MysqlContext,
  queries: ReturnType<typeof prepareQueries>,
): KeyStatements {
  const { db, table: keys } = context;
  return {
    // A duplicate key is the `false` answer of reserve: the row exists.
    reserve: async (id, fingerprint, expires) => {
      try {
        await retryDeadlocks(() => queries.reserve({ id, fingerprint, expires }));
        return 1;
      } catch (error) {
        if (mysqlErrno(error) === ER_DUP_ENTRY) return 0;
        throw error;
      }
    },
    finish: async (id, fingerprint, response) =>
      (await retryDeadlocks(() => queries.finish({ id, fingerprint, response }))).affectedRows,
    finishFenced: async (id, fingerprint, response, attempt) =>
      (await retryDeadlocks(() => queries.finishFenced({ id, fingerprint, response, attempt })))
        .affectedRows,
    release: async (id, fingerprint) =>
      (await retryDeadlocks(() => queries.release({ id, fingerprint }))).affectedRows,
    releaseFenced: async (id, fingerprint, attempt) =>
      (await retryDeadlocks(() => queries.releaseFenced({ id, fingerprint, attempt })))
        .affectedRows,
    renew: async (id, fingerprint, attempt, leaseUntil) =>
      (await retryDeadlocks(() => queries.renew({ id, fingerprint, attempt, leaseUntil })))
        .affectedRows,
    markUnrecorded: async (id, fingerprint, attempt) =>
      affected(
        await retryDeadlocks(() => queries.markUnrecorded.execute({ id, fingerprint, attempt })),
      ),
    acquire: async (id, fingerprint, { expires, now, leaseUntil, token }) => {
      try {
        await retryDeadlocks(() =>
          queries.acquireInsert({ id, fingerprint, expires, leaseUntil, token }),
        );
        return { attempt: token };
      } catch (error) {
        if (mysqlErrno(error) !== ER_DUP_ENTRY) throw error;
      }
      const taken = await retryDeadlocks(() =>
        queries.takeOver({ id, fingerprint, expires, leaseUntil, token, now }),
      );
      if (taken.affectedRows === 1) return { attempt: taken.insertId };
      return { row: await readRow(queries, id) };
    },
    replaceExpired: async (id, fingerprint, { expires, now, leaseUntil, token }) => {
      const replaced = await retryDeadlocks(() =>
        queries.replaceExpired({ id, fingerprint, expires, leaseUntil, token, now }),
      );
      return replaced.affectedRows === 1 ? replaced.insertId : undefined;
    },
    pendingKeys: async ({ now, stale, limit, prefix }) => {
      const rows = await db
        .select()
        .from(keys)
        .where(
          and(
            eq(keys.status, KeyStatus.pending),
            idStartsWith(keys, prefix),
            stale ? stalePending(keys, now) : undefined,
          ),
        )
        .orderBy(asc(keys.id))
        .limit(limit);
      return rows.map((row) => ({ ...row, lease_until: row.leaseUntil }));
    },
    // One conditional DELETE decides; the row is read only to say why nothing was deleted.
    releasePending: async (id, fingerprint) => {
      const result = await retryDeadlocks(() =>
        fingerprint === undefined
          ? queries.releasePending.execute({ id })
          : queries.releasePendingOf.execute({ id, fingerprint }),
      );
      if (affected(result) === 1) return { released: true };
      return { released: false, row: await readRow(queries, id) };
    },
    fetch: async (id, now) => (await queries.fetch({ id, now }))[0]?.response,
    get: (id) => readRow(queries, id),
    expired: (now, limit) => queries.expired.execute({ now, limit }),
    purge: (now, limit) => deleteExpired(context, now, limit, 'id'),
    sweepBatch: async (now, limit) => (await deleteExpired(context, now, limit, 'index')).length,
    eraseBatch: (prefix, limit) =>
      deleteLocked(
        context,
        and(eq(keys.status, KeyStatus.done), idStartsWith(keys, prefix)) as SQL,
        limit,
        'id',
      ),
    answers: (after, limit) =>
      db
        .select({ id: keys.id, response: keys.response })
        .from(keys)
        .where(and(eq(keys.status, KeyStatus.done), gt(keys.id, after)))
        .orderBy(asc(keys.id))
        .limit(limit),
    reseal: async (id, previous, response) =>
      affected(
        await retryDeadlocks(() =>
          db
            .update(keys)
            .set({ response })
            .where(
              and(eq(keys.id, id), eq(keys.status, KeyStatus.done), eq(keys.response, previous)),
            ),
        ),
      ),
    stepRecords: (after, limit) =>
      db
        .select({ id: keys.id, steps: keys.steps })
        .from(keys)
        .where(and(isNotNull(keys.steps), gt(keys.id, after)))
        .orderBy(asc(keys.id))
        .limit(limit),
    resealSteps: async (id, previous, steps) =>
      affected(
        await retryDeadlocks(() =>
          db
            .update(keys)
            .set({ steps })
            .where(and(eq(keys.id, id), eq(keys.steps, previous))),
        ),
      ),
    counts: () => queries.counts.execute(),
    stats: (now) => queries.stats.execute({ now }),
    close: () => context.onClose?.(),
  };
}

/**
 * The idempotency store on MySQL (8.0 or later) and MariaDB (10.6 or later), over drizzle's
 * mysql2 driver, usually on a pool. The table must exist: use `openMysqlStore`, or
 * `applyMysqlMigrations`, or your own drizzle-kit migrations with the exported table.
 *
 * How each operation stays atomic, with many application instances sharing one database:
 * - `reserve` is a plain `INSERT`: the primary key lets one of many concurrent inserts through
 *   and the others fail with a duplicate-key error, which is the `false` answer. Never
 *   `INSERT IGNORE`, which would also hide truncation and every other error.
 * - `finish` and `release` are one conditional `UPDATE` / `DELETE` each, told apart by the number
 *   of rows they changed; with a fencing token they also require `attempt = :attempt`.
 * - `acquire` inserts, or takes a lapsed lease over with one conditional `UPDATE` (see
 *   {@link MysqlIdempotencyStore.acquire}).
 * - `purge` and `sweepBatch` run one short transaction each: the candidates are locked with
 *   `SELECT … FOR UPDATE SKIP LOCKED` (parallel purgers skip each other's rows instead of waiting)
 *   and deleted with the predicate repeated. MySQL has no `DELETE … RETURNING`; the rows are
 *   locked from the select to the delete, so the ids selected are exactly the ids deleted, and the
 *   transaction is undone if the count of deleted rows ever says otherwise.
 *
 * Isolation: single statements need none in particular. The purge's transaction runs in
 * READ COMMITTED, set per transaction: under MySQL's default REPEATABLE READ its locking reads
 * would also lock the gaps of the ranges they scan and make concurrent `reserve`s wait on them.
 * A transaction MySQL picks as a deadlock victim is rolled back whole and run again.
 *
 * Keys and fingerprints are compared as bytes (VARBINARY): keys differing only by case or by
 * trailing spaces are different keys, and ids come back in byte order as on the other dialects.
 * Keys and fingerprints are at most {@link MYSQL_MAX_TEXT_BYTES} UTF-8 bytes, the limit of every
 * dialect; longer ones are refused with a typed error before anything is sent, so no `sql_mode`
 * can truncate them. The connection must speak utf8mb4
 * (mysql2's default).
 *
 * @typeParam T - the type of the stored responses
 * @example
 * ```ts
 * import { drizzle } from 'drizzle-orm/mysql2';
 * import mysql from 'mysql2/promise';
 * import { applyMysqlMigrations, MysqlIdempotencyStore } from 'drizzle-idempotency/mysql';
 *
 * const db = drizzle({ client: mysql.createPool(process.env.MYSQL_URL ?? '') });
 * await applyMysqlMigrations(db);
 * const store = new MysqlIdempotencyStore<{ receipt: number }>(db);
 * const now = Date.now() / 1000;
 * if (await store.reserve('order-42', 'fingerprint', now + 86_400)) {
 *   await store.finish('order-42', 'fingerprint', { receipt: 1 });
 * }
 * await store.fetch('order-42', now); // { receipt: 1 }
 * ```
 */
export class MysqlIdempotencyStore<T = unknown>
  extends AsyncIdempotencyStore<T>
  implements LeasedIdempotencyStore<T>
{
  readonly #db: AnyMysqlDatabase;
  readonly #table: MysqlKeysTable;
  readonly #batchStats: (() => MysqlBatchStats) | undefined;

  /**
   * @param database - a drizzle mysql2 database (or a `withReplicas` one: the store runs on its
   * primary); the store shares its connections
   * @param options - see {@link MysqlStoreOptions}
   * @throws {@link InvalidOptionError} for a `batch` that is not a boolean
   * @throws {@link UnrecognisedDatabaseError} when `database` is not a drizzle MySQL database (or
   * transaction) over a mysql2 or PlanetScale client
   */
  constructor(database: AnyMysqlDatabase, options: MysqlStoreOptions = {}) {
    const { table, name } = resolveMysqlTable(options);
    if (options.batch !== undefined && typeof options.batch !== 'boolean') {
      throw new InvalidOptionError(`batch must be a boolean, got ${typeof options.batch}`);
    }
    const db = primaryOf(database);
    assertDrizzleDatabase(db, MYSQL_DATABASE);
    const context = {
      db,
      table,
      retentionIndex: retentionIndexName(name),
      onClose: options.onClose,
      vitess: options.vitess === true,
    };
    const single = mysqlStatements(context, prepareQueries(db, table));
    const batching =
      options.batch === true
        ? batchingMysqlStatements(single, batchedMysqlStatements(db, table))
        : undefined;
    super(batching?.statements ?? single, options.encryption);
    this.#batchStats = batching?.stats;
    this.#db = db;
    this.#table = table;
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
  batchStats(): MysqlBatchStats | undefined {
    return this.#batchStats?.();
  }

  /** The drizzle database the store runs on. */
  get db(): AnyMysqlDatabase {
    return this.#db;
  }

  /** The keys table the store keeps its rows in; `mysqlTransaction` records there. */
  get table(): MysqlKeysTable {
    return this.#table;
  }

  /**
   * Reads what the server says about this store's deployment, without writing: see
   * `checkMysqlDeployment`. `openMysqlStore` runs it at open; call it on demand.
   *
   * @example
   * ```ts
   * const { findings } = await store.checkDeployment();
   * ```
   */
  checkDeployment(): Promise<DeploymentReport> {
    return checkMysqlDeployment(this.#db);
  }

  /**
   * {@inheritDoc IdempotencyStore.purge}
   *
   * One READ COMMITTED transaction: the lowest expired ids are locked with
   * `FOR UPDATE SKIP LOCKED`, deleted with the predicate repeated, and returned in byte order.
   * Rows another purger holds are skipped, not waited for.
   */
  override purge(now: number, limit?: number): Promise<string[]> {
    return super.purge(now, limit);
  }

  /**
   * {@inheritDoc LeasedIdempotencyStore.acquire}
   *
   * A plain INSERT of the missing key with a fresh fencing token; on a duplicate key, one
   * conditional UPDATE that takes over a lapsed lease of the same fingerprint, raises the token
   * above the old and the fresh one and sets the new lease and
   * retention deadline; otherwise the row is read and reported. Each decision is one atomic
   * statement, so of concurrent contenders exactly one acquires. A row deleted between the steps
   * (released, purged) makes the caller try the insert again.
   */
  override acquire(
    key: string,
    fingerprint: string,
    options: AcquireOptions,
  ): Promise<AcquireResult<T>> {
    return super.acquire(key, fingerprint, options);
  }
}
