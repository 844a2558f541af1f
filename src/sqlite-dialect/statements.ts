import type { KeyStatementsOf, Mode, ModeResult, StatsRow } from '../core/key-store.js';
import type { KeyRow } from '../core/record.js';
import type { MaybePromise } from '../core/store.js';
import { andThen } from '../core/thenable.js';
import type { SqliteStatement } from './compile.js';
import type { SqliteQueries } from './queries.js';

/**
 * How one SQLite runtime runs a statement: all that differs between better-sqlite3, libSQL, D1,
 * bun:sqlite or a Durable Object's SQLite. Rows come back as plain objects under the column
 * names. A synchronous driver (`M = 'sync'`) answers values; an asynchronous one, promises.
 *
 * @typeParam M - whether the driver answers plain values or promises
 * @example
 * ```ts
 * // bun:sqlite, synchronous
 * const driver: SqliteDriver<'sync'> = {
 *   read: (s) => db.prepare(s.sql).all(...s.args),
 *   returning: (s) => db.prepare(s.sql).all(...s.args),
 *   changes: (s) => db.prepare(s.sql).run(...s.args).changes,
 *   writeThenRead: (write, read) => pair.immediate(write, read),
 * };
 * ```
 */
export interface SqliteDriver<M extends Mode> {
  /** Runs a read; its rows. */
  read(statement: SqliteStatement): ModeResult<M, readonly unknown[]>;
  /**
   * Runs a read of one row by key; that row, or `undefined` (or `null`) when there is none. Where
   * absent, the first row of {@link SqliteDriver.read}: a synchronous driver asks for the one row
   * and builds no array of rows, a cost every replay's read would pay.
   */
  readRow?(statement: SqliteStatement): ModeResult<M, unknown>;
  /** Runs a write with `RETURNING`; the rows it returned. */
  returning(statement: SqliteStatement): ModeResult<M, readonly unknown[]>;
  /** Runs a write; the number of rows it changed. */
  changes(statement: SqliteStatement): ModeResult<M, number>;
  /**
   * Runs a write with `RETURNING`, then a read, as one atomic unit that holds the write lock from
   * the start (a `write` batch, a D1 `batch`, an `IMMEDIATE` transaction): the read sees the row
   * the write left, with no other writer in between. The rows of each.
   */
  writeThenRead(
    write: SqliteStatement,
    read: SqliteStatement,
  ): ModeResult<M, readonly [readonly unknown[], readonly unknown[]]>;
  /**
   * Copies the write-ahead log back into the database, called after a sweep batch deleted rows.
   * A batch rewrites pages all over the file; left in the WAL, they would be copied back by
   * whichever commit crosses the auto-checkpoint threshold, usually a request's. Absent where the
   * platform manages its storage (D1 and Durable Objects refuse `wal_checkpoint`).
   */
  checkpoint?(): unknown;
  /** Called once by the store's first `close()`. */
  close?(): unknown;
}

const fresh = (rows: readonly unknown[]) => rows[0] as KeyRow | undefined;
const first = (rows: readonly unknown[]): unknown => rows[0];

/**
 * The statements of a SQLite-family store: the shared compiled `queries`, each run by `driver`.
 * A new SQLite runtime is a driver and a call of this function, not a new store.
 *
 * @param driver - how the runtime runs a statement, see {@link SqliteDriver}
 * @param queries - from `sqliteQueries(db, table)`
 * @returns statements in the driver's mode, for {@link SyncIdempotencyStore} or
 * {@link AsyncIdempotencyStore}
 * @throws Error from `acquire` if the atomic unit read no row after a conflict: a driver whose
 * `writeThenRead` is not atomic
 */
export function sqliteStatements<M extends Mode>(
  driver: SqliteDriver<M>,
  queries: SqliteQueries,
): KeyStatementsOf<M> {
  // Written once over either mode: each answer is a value or a promise of it.
  const run = driver as unknown as SqliteDriver<Mode>;
  const readRow =
    run.readRow ?? ((statement: SqliteStatement) => andThen(run.read(statement), first));
  const statements: KeyStatementsOf<Mode> = {
    reserve: (id, fingerprint, expires) =>
      run.changes(queries.reserve.bind({ id, fingerprint, expires })),
    finish: (id, fingerprint, response) =>
      run.changes(queries.finish.bind({ id, fingerprint, response })),
    finishFenced: (id, fingerprint, response, attempt) =>
      run.changes(queries.finishFenced.bind({ id, fingerprint, response, attempt })),
    release: (id, fingerprint) => run.changes(queries.release.bind({ id, fingerprint })),
    releaseFenced: (id, fingerprint, attempt) =>
      run.changes(queries.releaseFenced.bind({ id, fingerprint, attempt })),
    renew: (id, fingerprint, attempt, leaseUntil) =>
      run.changes(queries.renew.bind({ id, fingerprint, attempt, leaseUntil })),
    markUnrecorded: (id, fingerprint, attempt) =>
      run.changes(queries.markUnrecorded.bind({ id, fingerprint, attempt })),
    // The write alone first: it commits on its own when it inserts the key or takes it over, the
    // usual case, with no transaction around it and no read after it. Only when it changed nothing
    // is it run again beside the read, in one atomic unit, so the row read is the one it met.
    acquire: (id, fingerprint, { expires, now, leaseUntil, token }) => {
      const write = queries.acquire.bind({ id, fingerprint, expires, leaseUntil, token, now });
      return andThen(run.returning(write), (alone) => {
        const owned = alone[0] as { attempt: number } | undefined;
        if (owned !== undefined) return { attempt: owned.attempt };
        return andThen(run.writeThenRead(write, queries.get.bind({ id })), ([won, existing]) => {
          const again = won[0] as { attempt: number } | undefined;
          if (again !== undefined) return { attempt: again.attempt };
          const row = fresh(existing);
          if (row === undefined) throw new Error('SQLite lost the row acquire conflicted with');
          return { row };
        });
      });
    },
    replaceExpired: (id, fingerprint, { expires, now, leaseUntil, token }) =>
      andThen(
        run.returning(
          queries.replaceExpired.bind({ id, fingerprint, expires, leaseUntil, token, now }),
        ),
        (rows) => (rows[0] as { attempt: number } | undefined)?.attempt,
      ),
    pendingKeys: ({ now, stale, limit, prefix }) =>
      run.read(
        stale
          ? queries.stalePendingKeys.bind({ now, limit, prefix })
          : queries.pendingKeys.bind({ limit, prefix }),
      ) as MaybePromise<readonly KeyRow[]>,
    // The verdict is about the row the delete saw: the read runs in the same atomic unit.
    releasePending: (id, fingerprint) =>
      andThen(
        run.writeThenRead(
          queries.releasePending.bind({ id, fingerprint: fingerprint ?? null }),
          queries.get.bind({ id }),
        ),
        ([deleted, left]) =>
          deleted.length === 1
            ? { released: true as const }
            : { released: false as const, row: fresh(left) },
      ),
    fetch: (id, now) =>
      andThen(readRow(queries.fetch.bind({ id, now })), (row) => {
        const text = (row as { response?: unknown } | null | undefined)?.response;
        return typeof text === 'string' ? text : null;
      }),
    get: (id) =>
      andThen(readRow(queries.get.bind({ id })), (row) => (row ?? undefined) as KeyRow | undefined),
    expired: (now, limit) =>
      run.read(queries.expired.bind({ now, limit })) as MaybePromise<readonly { id: string }[]>,
    purge: (now, limit) =>
      run.returning(queries.purge.bind({ now, limit })) as MaybePromise<readonly { id: string }[]>,
    sweepBatch: (now, limit) =>
      andThen(run.changes(queries.sweepBatch.bind({ now, limit })), (deleted) =>
        deleted > 0 && run.checkpoint !== undefined
          ? andThen(run.checkpoint(), () => deleted)
          : deleted,
      ),
    eraseBatch: (prefix, limit) =>
      run.returning(queries.eraseBatch.bind({ prefix, limit })) as MaybePromise<
        readonly { id: string }[]
      >,
    answers: (after, limit) =>
      run.read(queries.answers.bind({ after, limit })) as MaybePromise<
        readonly { id: string; response: string | null }[]
      >,
    reseal: (id, previous, response) =>
      run.changes(queries.reseal.bind({ id, previous, response })),
    stepRecords: (after, limit) =>
      run.read(queries.stepRecords.bind({ after, limit })) as MaybePromise<
        { id: string; steps: string | null }[]
      >,
    resealSteps: (id, previous, steps) =>
      run.changes(queries.resealSteps.bind({ id, previous, steps })),
    counts: () =>
      run.read(queries.counts.bind({})) as MaybePromise<
        readonly { status: string; count: number }[]
      >,
    stats: (now) => run.read(queries.stats.bind({ now })) as MaybePromise<readonly StatsRow[]>,
    close: () => run.close?.(),
  };
  return statements as KeyStatementsOf<M>;
}

/**
 * The part of a synchronous SQLite connection the family's statements use: better-sqlite3's and
 * bun:sqlite's `Database` both have it.
 */
export interface SyncSqliteConnection {
  prepare(sql: string): {
    run(...args: unknown[]): { readonly changes: number | bigint };
    all(...args: unknown[]): unknown[];
    get(...args: unknown[]): unknown;
  };
  transaction<A extends unknown[], R>(body: (...args: A) => R): { immediate(...args: A): R };
}

/**
 * `prepare` run once per SQL text: each later call with the same text answers the statement
 * prepared the first time, so a statement compiled once at start-up is parsed by SQLite once.
 *
 * @param prepare - prepares one SQL text on the connection
 */
export function preparedOnce<S>(prepare: (sql: string) => S): (sql: string) => S {
  const prepared = new Map<string, S>();
  return (sql) => {
    let statement = prepared.get(sql);
    if (statement === undefined) {
      statement = prepare(sql);
      prepared.set(sql, statement);
    }
    return statement;
  };
}

/**
 * The driver of a synchronous connection (better-sqlite3, bun:sqlite): each statement text is
 * prepared once and reused, and the write and the read of what it left run in one IMMEDIATE
 * transaction (a savepoint inside an open one), so they see one state whatever another process
 * does. The runtime adds its checkpoint and close.
 *
 * @param connection - the open connection
 */
export function syncSqliteDriver(
  connection: SyncSqliteConnection,
): Pick<SqliteDriver<'sync'>, 'read' | 'returning' | 'changes' | 'writeThenRead'> &
  Required<Pick<SqliteDriver<'sync'>, 'readRow'>> {
  const on = preparedOnce((sql) => connection.prepare(sql));
  const all = (statement: SqliteStatement): unknown[] => on(statement.sql).all(...statement.args);
  const pair = connection.transaction(
    (write: SqliteStatement, read: SqliteStatement) => [all(write), all(read)] as const,
  );
  return {
    read: all,
    readRow: (statement) => on(statement.sql).get(...statement.args),
    returning: all,
    changes: (statement) => Number(on(statement.sql).run(...statement.args).changes),
    writeThenRead: (write, read) => pair.immediate(write, read),
  };
}
