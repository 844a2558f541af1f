import type { Worker } from 'node:worker_threads';
import { getTableConfig } from 'drizzle-orm/sqlite-core';
import { AsyncIdempotencyStore, type KeyStatements } from '../core/async-store.js';
import { checkedEncryption, type Keyring } from '../core/encryption.js';
import type { LeasedIdempotencyStore } from '../core/store.js';
import { assertIntegerOption, DEFAULT_BATCH_MILLIS } from '../core/validation.js';
import type { OpenSqliteStoreOptions } from './open.js';
import { MAX_ANSWER_CACHE_SIZE } from './store.js';
import { TransactionUnsupportedError } from './worker-errors.js';
import { WorkerLink } from './worker-link.js';
import type { StatementName } from './worker-protocol.js';

// The statements the store asks of its worker, each sent as it is called: the store's own checks,
// serialization and result shaping stay on the caller's thread, in `KeyStore`. Keyed by name, so
// a statement added to the store's contract fails the typecheck here until it is forwarded too.
// `insertOrGet` is not among them: SQLite has no such statement, and the claim reads first.
const FORWARDED: Record<Exclude<StatementName, 'close' | 'insertOrGet'>, true> = {
  reserve: true,
  replaceExpired: true,
  finish: true,
  finishFenced: true,
  release: true,
  releaseFenced: true,
  renew: true,
  markUnrecorded: true,
  acquire: true,
  pendingKeys: true,
  releasePending: true,
  fetch: true,
  get: true,
  expired: true,
  purge: true,
  sweepBatch: true,
  counts: true,
  stats: true,
  eraseBatch: true,
  answers: true,
  reseal: true,
  stepRecords: true,
  resealSteps: true,
};
const STATEMENTS = Object.keys(FORWARDED) as (keyof typeof FORWARDED)[];

function linkedStatements(link: WorkerLink): KeyStatements {
  const calls = Object.fromEntries(
    STATEMENTS.map((name) => [name, (...args: unknown[]) => link.call(name, args)]),
  );
  return { ...calls, close: () => link.close() } as unknown as KeyStatements;
}

/**
 * The SQLite store whose statements run on a worker thread, for servers with many requests in
 * flight on a machine with a core to spare: the request path (the HTTP layer, fingerprints, the
 * store's checks and JSON) keeps this thread, while SQLite's work (statements, commits, the
 * answer cache) runs on the other, as a Redis server's work does on its own core. Measure before
 * choosing it: the thread hop costs CPU too, and on the benchmarks' two-core machine it reached
 * about three quarters of {@link SqliteGroupCommitStore}'s throughput at 32 requests in flight
 * (BENCHMARKS.md); it pays only where SQLite's work is most of a request's.
 *
 * The calls made in one turn of the event loop travel as one message and commit in one
 * transaction (group commit, as {@link SqliteGroupCommitStore} does on one thread). Every
 * guarantee of the store holds unchanged: the worker runs the same statements as
 * `SqliteIdempotencyStore`, in call order, a promise resolves only once its write is committed,
 * and a bad argument rejects its own promise with the same typed error (it is checked here,
 * before anything is sent).
 *
 * Its limits: no transactional form (its `db` throws {@link TransactionUnsupportedError}; use
 * `sqliteTransaction(openSqliteStore(path))` on the same file), a thread's memory (a V8 isolate
 * and a connection), and a round trip between threads on every call, which a lone request pays.
 * If the thread ends without `close()`, every waiting and later call rejects with
 * {@link StoreThreadExitedError} and `closed` is `true`. Open it with
 * {@link openSqliteWorkerStore}.
 *
 * @typeParam T - the type of the stored responses
 */
export class SqliteWorkerStore<T = unknown>
  extends AsyncIdempotencyStore<T>
  implements LeasedIdempotencyStore<T>
{
  /** {@inheritDoc IdempotencyStore.sweepBatchMillis} */
  readonly sweepBatchMillis: number = DEFAULT_BATCH_MILLIS;
  readonly #link: WorkerLink;

  /**
   * @param link - the worker thread, as {@link openSqliteWorkerStore} starts it
   * @param encryption - the keyring answers are sealed with, on this thread: the keys never
   *   cross to the worker, which stores and reads sealed text only
   */
  constructor(link: WorkerLink, encryption?: Keyring) {
    super(linkedStatements(link), encryption);
    this.#link = link;
  }

  /** The worker thread the statements run on (its `threadId`, its resource usage). */
  get worker(): Worker {
    return this.#link.worker;
  }

  /**
   * How many transactions of more than one call the worker had committed or attempted, as of its
   * last answer: a measure of the grouping.
   */
  get batches(): number {
    return this.#link.batches;
  }

  /** Whether the store is closed: by `close()`, or because its worker thread ended. */
  get closed(): boolean {
    return this.#link.closed;
  }

  /**
   * The connection lives on the worker thread: there is no database here to run a transaction on.
   *
   * @throws {@link TransactionUnsupportedError} always
   */
  get db(): never {
    throw new TransactionUnsupportedError();
  }

  /**
   * {@inheritDoc IdempotencyStore.close}
   *
   * Closes the connection once every operation called before has run, then ends the worker
   * thread; resolves once it has exited.
   */
  override close(): Promise<void> {
    return super.close();
  }
}

/**
 * Opens (creating if needed) a SQLite file as a {@link SqliteWorkerStore}: a worker thread opens
 * it exactly as `openSqliteStore` does (WAL journal, busy timeout, `synchronous`, the deployment
 * check, the migrations), then runs the store's statements. Deployment warnings reach
 * `onDeploymentWarning` on this thread.
 *
 * @param path - the database file (`:memory:` would be the worker's own, out of reach of anything
 *   else)
 * @param options - as for `openSqliteStore`
 * @typeParam T - the type of the stored responses
 * @example
 * ```ts
 * import { idempotent } from 'drizzle-idempotency/http';
 * import { openSqliteWorkerStore } from 'drizzle-idempotency/sqlite';
 *
 * const store = await openSqliteWorkerStore('./idempotency.db');
 * const layer = idempotent(store, { ttlSeconds: 86_400 });
 * // … serve requests …
 * await store.close();
 * ```
 * @throws {@link DatabaseOpenError} for a missing directory, a directory, a file that is not a
 * database, or a file that cannot be opened
 * @throws {@link SchemaMismatchError} when a foreign `keys` table is in the way
 * @throws {@link InvalidOptionError} for an option out of range or a keyring that is not well
 * formed (checked before the thread starts)
 */
export async function openSqliteWorkerStore<T = unknown>(
  path: string,
  options: OpenSqliteStoreOptions = {},
): Promise<SqliteWorkerStore<T>> {
  const { encryption } = checkedEncryption(options);
  const answerCacheSize = options.answerCacheSize ?? 0;
  assertIntegerOption(answerCacheSize, 'answerCacheSize', 0, MAX_ANSWER_CACHE_SIZE);
  const { link, findings } = await WorkerLink.open({
    path,
    busyTimeoutMs: options.busyTimeoutMs,
    synchronous: options.synchronous,
    answerCacheSize,
    table: options.table === undefined ? undefined : getTableConfig(options.table).name,
  });
  for (const finding of findings) options.onDeploymentWarning?.(finding);
  return new SqliteWorkerStore<T>(link, encryption);
}
