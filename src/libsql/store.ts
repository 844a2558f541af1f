import type { Client, InStatement, ResultSet } from '@libsql/client';
import { and, asc, eq, gt, inArray, isNull, lte, or, sql } from 'drizzle-orm';
import type { LibSQLDatabase } from 'drizzle-orm/libsql';
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
import { type KeyRow, toRecord } from '../core/record.js';
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
import { compileLibsqlStatement } from './compile.js';
import { keys as defaultKeys, type SqliteKeysTable } from './schema.js';

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

function compileQueries(db: AnyLibsqlDatabase, keys: SqliteKeysTable) {
  // Retention only ever selects done rows past their deadline; a pending row is owned by its worker.
  const isExpiredAnswer = and(eq(keys.status, KeyStatus.done), lte(keys.expires, p('now')));
  const ownPending = and(
    eq(keys.id, p('id')),
    eq(keys.fingerprint, p('fingerprint')),
    eq(keys.status, KeyStatus.pending),
  );
  // The row an owner holds with its token, not handed to an operator: the fenced writes' target.
  const ownedBy = and(ownPending, eq(keys.attempt, p('attempt')), eq(keys.unrecorded, false));
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
    // One statement: inserts a missing key with attempt 1, or takes over a pending row of the
    // same fingerprint whose lease lapsed, bumping its attempt; returns no row otherwise. A row
    // without a lease (NULL) never compares as lapsed.
    acquire: compileLibsqlStatement(
      db
        .insert(keys)
        .values({
          id: p('id'),
          fingerprint: p('fingerprint'),
          status: KeyStatus.pending,
          expires: p('expires'),
          leaseUntil: p('leaseUntil'),
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
        .where(and(ownPending, eq(keys.attempt, p('attempt')))),
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
        .where(and(ownPending, eq(keys.attempt, p('attempt')))),
      ['id', 'fingerprint', 'attempt'],
    ),
    pendingKeys: compileLibsqlStatement(pendingRows(isPending), ['limit']),
    stalePendingKeys: compileLibsqlStatement(
      pendingRows(
        and(
          isPending,
          or(
            eq(keys.unrecorded, true),
            lte(keys.leaseUntil, p('now')),
            and(isNull(keys.leaseUntil), lte(keys.expires, p('now'))),
          ),
        ),
      ),
      ['now', 'limit'],
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
 * same client would block the process until the busy timeout.
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
export class LibsqlIdempotencyStore<T = unknown> implements LeasedIdempotencyStore<T> {
  readonly #db: AnyLibsqlDatabase;
  readonly #queries: ReturnType<typeof compileQueries>;
  readonly #closeConnection: boolean;
  #closed = false;

  /**
   * @param db - a drizzle database over a libSQL client; the store shares its client
   * @param options - see {@link LibsqlStoreOptions}
   */
  constructor(db: AnyLibsqlDatabase, options: LibsqlStoreOptions = {}) {
    this.#db = db;
    this.#queries = compileQueries(db, options.table ?? defaultKeys);
    this.#closeConnection = options.closeConnection ?? false;
  }

  /** The drizzle database the store runs on; use it to run your own queries on the same client. */
  get db(): AnyLibsqlDatabase {
    return this.#db;
  }

  #open(): ReturnType<typeof compileQueries> {
    if (this.#closed) throw new StoreClosedError();
    return this.#queries;
  }

  #read(statement: InStatement): Promise<ResultSet> {
    return this.#db.$client.execute(statement);
  }

  async #write(statement: InStatement): Promise<ResultSet> {
    const [result] = await this.#db.$client.batch([statement], 'write');
    if (result === undefined) throw new Error('libSQL returned no result for a batch of one');
    return result;
  }

  /** {@inheritDoc IdempotencyStore.reserve} */
  async reserve(key: string, digest: string, expires: number): Promise<boolean> {
    assertKey(key);
    assertDigest(digest);
    assertTime(expires, 'expires');
    const statement = this.#open().reserve.bind({ id: key, fingerprint: digest, expires });
    return (await this.#write(statement)).rowsAffected === 1;
  }

  /** {@inheritDoc LeasedIdempotencyStore.finish} */
  async finish(key: string, digest: string, response: T, attempt?: number): Promise<boolean> {
    assertKey(key);
    assertDigest(digest);
    if (attempt !== undefined) assertAttempt(attempt);
    const text = serializeResponse(response);
    const queries = this.#open();
    const owner = { id: key, fingerprint: digest, response: text };
    const statement =
      attempt === undefined
        ? queries.finish.bind(owner)
        : queries.finishFenced.bind({ ...owner, attempt });
    return (await this.#write(statement)).rowsAffected === 1;
  }

  /**
   * {@inheritDoc LeasedIdempotencyStore.acquire}
   *
   * The insert-or-take-over statement and the read of what is there run in one `write` batch, so
   * the row read is the one the statement left.
   */
  async acquire(key: string, digest: string, options: AcquireOptions): Promise<AcquireResult<T>> {
    assertKey(key);
    assertDigest(digest);
    const leaseUntil = leaseDeadline(options);
    const queries = this.#open();
    const { expires, now } = options;
    const [won, existing] = await this.#db.$client.batch(
      [
        queries.acquire.bind({ id: key, fingerprint: digest, expires, leaseUntil, now }),
        queries.get.bind({ id: key }),
      ],
      'write',
    );
    const [owned] = won === undefined ? [] : rowsOf<{ attempt: number }>(won);
    if (owned !== undefined) return acquiredOutcome(owned.attempt, leaseUntil);
    const [row] = existing === undefined ? [] : rowsOf<KeyRow>(existing);
    if (row === undefined) throw new Error('libSQL lost the row acquire conflicted with');
    return existingOutcome<T>(row, digest);
  }

  /** {@inheritDoc LeasedIdempotencyStore.renew} */
  async renew(key: string, digest: string, attempt: number, leaseUntil: number): Promise<boolean> {
    assertKey(key);
    assertDigest(digest);
    assertAttempt(attempt);
    assertTime(leaseUntil, 'leaseUntil');
    const statement = this.#open().renew.bind({
      id: key,
      fingerprint: digest,
      attempt,
      leaseUntil,
    });
    return (await this.#write(statement)).rowsAffected === 1;
  }

  /** {@inheritDoc LeasedIdempotencyStore.markUnrecorded} */
  async markUnrecorded(key: string, digest: string, attempt: number): Promise<boolean> {
    assertKey(key);
    assertDigest(digest);
    assertAttempt(attempt);
    const statement = this.#open().markUnrecorded.bind({ id: key, fingerprint: digest, attempt });
    return (await this.#write(statement)).rowsAffected === 1;
  }

  /** {@inheritDoc LeasedIdempotencyStore.pendingKeys} */
  async pendingKeys(options: PendingKeysOptions): Promise<PendingKey[]> {
    assertTime(options?.now, 'now');
    const limit = pendingLimit(options.limit);
    const queries = this.#open();
    const { now } = options;
    const statement = options.stale
      ? queries.stalePendingKeys.bind({ now, limit })
      : queries.pendingKeys.bind({ limit });
    return rowsOf<KeyRow>(await this.#read(statement)).map((row) => toPendingKey(row, now));
  }

  /** {@inheritDoc LeasedIdempotencyStore.releasePending} */
  async releasePending(key: string, fingerprint?: string): Promise<ReleasePendingResult> {
    assertKey(key);
    if (fingerprint !== undefined) assertDigest(fingerprint);
    const queries = this.#open();
    // The delete and the read of what stayed run in one write batch: the verdict is about the row
    // the delete saw.
    const [deleted, left] = await this.#db.$client.batch(
      [
        queries.releasePending.bind({ id: key, fingerprint: fingerprint ?? null }),
        queries.get.bind({ id: key }),
      ],
      'write',
    );
    if (deleted !== undefined && deleted.rows.length === 1) return 'released';
    const [row] = left === undefined ? [] : rowsOf<KeyRow>(left);
    if (row === undefined) return 'missing';
    return row.status === KeyStatus.done ? 'done' : 'mismatch';
  }

  /** {@inheritDoc IdempotencyStore.fetch} */
  async fetch(key: string, now: number): Promise<T | null> {
    assertKey(key);
    assertTime(now, 'now');
    const result = await this.#read(this.#open().fetch.bind({ id: key, now }));
    const text = result.rows[0]?.response;
    return typeof text === 'string' ? parseResponse<T>(text) : null;
  }

  /** {@inheritDoc IdempotencyStore.expired} */
  async expired(now: number, limit: number = DEFAULT_LIMIT): Promise<string[]> {
    assertLimit(limit);
    assertTime(now, 'now');
    const result = await this.#read(this.#open().expired.bind({ now, limit }));
    return rowsOf<{ id: string }>(result).map((row) => row.id);
  }

  /**
   * {@inheritDoc IdempotencyStore.purge}
   *
   * One statement in one `write` transaction: the candidates are selected in id order and deleted
   * with the predicate repeated; only the ids actually deleted are returned, still ascending.
   */
  async purge(now: number, limit: number = DEFAULT_LIMIT): Promise<string[]> {
    assertLimit(limit);
    assertTime(now, 'now');
    const result = await this.#write(this.#open().purge.bind({ now, limit }));
    return rowsOf<{ id: string }>(result)
      .map((row) => row.id)
      .sort(compareKeys);
  }

  /** {@inheritDoc IdempotencyStore.counts} */
  async counts(): Promise<StatusCounts> {
    const result = await this.#read(this.#open().counts.bind({}));
    return countByStatus(rowsOf<{ status: string; count: number }>(result));
  }

  /** {@inheritDoc IdempotencyStore.sweepBatch} */
  async sweepBatch(now: number, batchSize: number): Promise<number> {
    assertIntegerOption(batchSize, 'batchSize', 1, MAX_BATCH_SIZE);
    assertTime(now, 'now');
    const client = this.#db.$client;
    const deleted = (await this.#write(this.#open().sweepBatch.bind({ now, limit: batchSize })))
      .rowsAffected;
    // A batch rewrites pages all over the file. Left in the WAL, they would be copied back by
    // whichever connection's commit crosses the auto-checkpoint threshold, usually a request's
    // reserve. Copying them here keeps that cost on the sweeper. PASSIVE never waits for other
    // connections; outside WAL mode it does nothing.
    if (deleted > 0) await client.execute('PRAGMA wal_checkpoint(PASSIVE)');
    return deleted;
  }

  /** {@inheritDoc LeasedIdempotencyStore.stats} */
  async stats(now: number): Promise<LeaseStats> {
    assertTime(now, 'now');
    const rows = rowsOf<{
      status: string;
      count: number;
      past: number;
      lapsed: number;
      unrecorded: number;
    }>(await this.#read(this.#open().stats.bind({ now })));
    const past = countByStatus(rows.map((row) => ({ status: row.status, count: row.past })));
    const pending = rows.find((row) => row.status === KeyStatus.pending);
    return {
      ...countByStatus(rows),
      expired: past.done,
      stalePending: past.pending,
      lapsed: pending?.lapsed ?? 0,
      unrecorded: pending?.unrecorded ?? 0,
    };
  }

  /** {@inheritDoc LeasedIdempotencyStore.release} */
  async release(key: string, digest: string, attempt?: number): Promise<boolean> {
    assertKey(key);
    assertDigest(digest);
    if (attempt !== undefined) assertAttempt(attempt);
    const queries = this.#open();
    const statement =
      attempt === undefined
        ? queries.release.bind({ id: key, fingerprint: digest })
        : queries.releaseFenced.bind({ id: key, fingerprint: digest, attempt });
    return (await this.#write(statement)).rowsAffected === 1;
  }

  /** {@inheritDoc IdempotencyStore.get} */
  async get(key: string): Promise<IdempotencyRecord<T> | null> {
    assertKey(key);
    const [row] = rowsOf<KeyRow>(await this.#read(this.#open().get.bind({ id: key })));
    return row === undefined ? null : toRecord<T>(row);
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
    if (this.#closeConnection) this.#db.$client.close();
  }
}
