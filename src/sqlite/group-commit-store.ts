import type { Encryption } from '../core/encryption.js';
import type {
  EraseOptions,
  EraseResult,
  RekeyOptions,
  RekeyResult,
  SealingReport,
} from '../core/erasure.js';
import { GroupCommit, type Transact } from '../core/group-commit.js';
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
import type { SqliteIdempotencyStore } from './store.js';

/**
 * The SQLite store for servers with many requests in flight: the same operations, returning
 * promises, with concurrent calls committed together (see {@link GroupCommit}). Under load a burst
 * of reserves and finishes costs one commit instead of one each; a lone call runs at once.
 *
 * Every guarantee of the store holds unchanged: each operation is the same single statement (or
 * the same transaction) as on the synchronous store, operations run in the order they were
 * called, a promise resolves only once its write is committed, and a bad argument rejects its own
 * promise with the same typed error while its neighbours commit.
 *
 * Encryption at rest and erasure are the underlying store's: open it with `encryption` and its
 * answers are sealed (and request fingerprints keyed) through this store too; `erase`, `rekey`
 * and `sealingReport` run the underlying store's, in call order.
 *
 * @typeParam T - the type of the stored responses
 * @example
 * ```ts
 * const store = new SqliteGroupCommitStore(openSqliteStore<Receipt>('./idempotency.db'));
 * if (await store.reserve(key, fingerprint, expires)) {
 *   await store.finish(key, fingerprint, await charge());
 * }
 * ```
 */
export class SqliteGroupCommitStore<T = unknown> implements LeasedIdempotencyStore<T> {
  readonly #store: SqliteIdempotencyStore<T>;
  readonly #group: GroupCommit;
  /** {@inheritDoc IdempotencyStore.sweepBatchMillis} */
  readonly sweepBatchMillis: number | undefined;

  /** @param store - the synchronous store to run on; `close()` closes it */
  constructor(store: SqliteIdempotencyStore<T>) {
    this.#store = store;
    this.sweepBatchMillis = store.sweepBatchMillis;
    // One transaction function on the connection for every batch: drizzle's `transaction` would
    // build a transaction object and better-sqlite3's four wrappers around the body each time.
    const batch = store.db.$client.transaction((body: () => unknown) => body());
    this.#group = new GroupCommit(((body) => batch.immediate(body)) as Transact);
  }

  /** The synchronous store underneath, for code that runs inside your own transactions. */
  get store(): SqliteIdempotencyStore<T> {
    return this.#store;
  }

  /**
   * What seals the underlying store's answers and keys request fingerprints; `undefined` with
   * encryption off.
   */
  get encryption(): Encryption | undefined {
    return this.#store.encryption;
  }

  /** How many transactions of more than one operation were run: a measure of the grouping. */
  get batches(): number {
    return this.#group.batches;
  }

  /** {@inheritDoc IdempotencyStore.reserve} */
  reserve(key: string, fingerprint: string, expires: number): Promise<boolean> {
    return this.#group.run(() => this.#store.reserve(key, fingerprint, expires));
  }

  /** {@inheritDoc LeasedIdempotencyStore.finish} */
  finish(key: string, fingerprint: string, response: T, fencingToken?: number): Promise<boolean> {
    return this.#group.run(() => this.#store.finish(key, fingerprint, response, fencingToken));
  }

  /** {@inheritDoc LeasedIdempotencyStore.acquire} */
  acquire(key: string, fingerprint: string, options: AcquireOptions): Promise<AcquireResult<T>> {
    return this.#group.run(() => this.#store.acquire(key, fingerprint, options));
  }

  /** {@inheritDoc LeasedIdempotencyStore.renew} */
  renew(
    key: string,
    fingerprint: string,
    fencingToken: number,
    leaseUntil: number,
  ): Promise<boolean> {
    return this.#group.run(() => this.#store.renew(key, fingerprint, fencingToken, leaseUntil));
  }

  /** {@inheritDoc LeasedIdempotencyStore.markUnrecorded} */
  markUnrecorded(key: string, fingerprint: string, fencingToken: number): Promise<boolean> {
    return this.#group.run(() => this.#store.markUnrecorded(key, fingerprint, fencingToken));
  }

  /** {@inheritDoc LeasedIdempotencyStore.pendingKeys} */
  pendingKeys(options: PendingKeysOptions): Promise<PendingKey[]> {
    return this.#group.read(() => this.#store.pendingKeys(options));
  }

  /** {@inheritDoc LeasedIdempotencyStore.releasePending} */
  releasePending(key: string, fingerprint?: string): Promise<ReleasePendingResult> {
    return this.#group.run(() => this.#store.releasePending(key, fingerprint));
  }

  /** {@inheritDoc IdempotencyStore.fetch} */
  fetch(key: string, now: number): Promise<T | null> {
    return this.#group.read(() => this.#store.fetch(key, now));
  }

  /** {@inheritDoc IdempotencyStore.expired} */
  expired(now: number, limit?: number): Promise<string[]> {
    return this.#group.read(() => this.#store.expired(now, limit));
  }

  /** {@inheritDoc IdempotencyStore.purge} */
  purge(now: number, limit?: number): Promise<string[]> {
    return this.#group.run(() => this.#store.purge(now, limit));
  }

  /** {@inheritDoc IdempotencyStore.counts} */
  counts(): Promise<StatusCounts> {
    return this.#group.read(() => this.#store.counts());
  }

  /** {@inheritDoc IdempotencyStore.sweepBatch} */
  sweepBatch(now: number, batchSize: number): Promise<number> {
    return this.#group.run(() => this.#store.sweepBatch(now, batchSize));
  }

  /** {@inheritDoc LeasedIdempotencyStore.stats} */
  stats(now: number): Promise<LeaseStats> {
    return this.#group.read(() => this.#store.stats(now));
  }

  /** {@inheritDoc LeasedIdempotencyStore.release} */
  release(key: string, fingerprint: string, fencingToken?: number): Promise<boolean> {
    return this.#group.run(() => this.#store.release(key, fingerprint, fencingToken));
  }

  /** {@inheritDoc IdempotencyStore.get} */
  get(key: string): Promise<IdempotencyRecord<T> | null> {
    return this.#group.read(() => this.#store.get(key));
  }

  /**
   * Erases every done answer of one scope, as `SqliteIdempotencyStore.erase` does, after the
   * operations called before it (in their transaction when it joins a burst).
   *
   * @example
   * ```ts
   * const { erased, pending } = await store.erase({ scope: 'customer-7' });
   * ```
   */
  erase(options: EraseOptions): Promise<EraseResult> {
    return this.#group.run(() => this.#store.erase(options));
  }

  /** Re-seals answers under the keyring's current key, as `SqliteIdempotencyStore.rekey` does. */
  rekey(options?: RekeyOptions): Promise<RekeyResult> {
    return this.#group.run(() => this.#store.rekey(options));
  }

  /** How the stored answers are kept, as `SqliteIdempotencyStore.sealingReport` counts them. */
  sealingReport(options?: RekeyOptions): Promise<SealingReport> {
    return this.#group.read(() => this.#store.sealingReport(options));
  }

  /**
   * Closes the store once every operation called before has run and committed; every operation
   * called after it rejects with `StoreClosedError`.
   */
  close(): Promise<void> {
    return this.#group.close(() => this.#store.close());
  }
}
