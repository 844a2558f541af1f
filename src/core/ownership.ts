import type { ClaimSettings } from './claim-options.js';
import { type Heartbeat, heartbeat } from './heartbeat.js';
import type { IdempotencyStore, LeasedIdempotencyStore } from './store.js';
import type { KeyOwner, TransactionOutcome, TransactionRunner } from './transaction-runner.js';

/**
 * A key the claim engine won: what its owner may do with it until the work is done. On a store
 * with leases the lease is renewed in the background from the claim on, every write carries the
 * fencing token, and the first of `finish`, `release`, `abandon` or `markUnrecorded` (or the end of
 * `transact`) stops the renewal.
 */
export interface Ownership {
  /** The key, the fingerprint it was claimed with and, on a store with leases, the fencing token. */
  readonly owner: KeyOwner;
  /** Whether the claim took the key over from an owner whose lease lapsed; `false` for a fresh key. */
  readonly takenOver: boolean;
  /**
   * Records `answer` on the owner's pending row. `false` when that row is gone or no longer the
   * owner's (released by hand, or taken over after its lease lapsed). Throws what the store throws.
   */
  finish(answer: unknown): Promise<boolean>;
  /** Deletes the owner's pending row (never another owner's or a stored answer), so a retry runs. */
  release(): Promise<void>;
  /**
   * The work failed with `error`: releases the key. Resolves once released; rejects with an
   * `AggregateError` of `error` and the store's error, with `message`, when releasing fails.
   */
  abandon(error: unknown, message: string): Promise<void>;
  /**
   * The work ran but its answer cannot be recorded: marks the row so no retry takes it over (that
   * would run the effect again) and an operator sees it. Nothing to do on a store without leases,
   * whose pending rows are never taken over. Throws what the store throws.
   */
  markUnrecorded(): Promise<void>;
  /** Extends the lease by `leaseSeconds` from now; `false` when the row is no longer the owner's or the store has no leases. */
  renew(): Promise<boolean>;
  /**
   * Whether a retry took the key over while the work ran: the row holds the same fingerprint under
   * a newer fencing token. `false` on a store without leases, and when the row cannot be read.
   */
  superseded(): Promise<boolean>;
  /**
   * Runs `handler` and records its result with `record` in one transaction of `runner`, fenced by
   * the owner's token (see {@link TransactionRunner.run}); the lease is renewed until it ends.
   */
  transact<TX, R>(
    runner: TransactionRunner<TX>,
    handler: (tx: TX) => R | Promise<R>,
    record: (result: R) => string,
  ): Promise<TransactionOutcome<R>>;
  /** Stops renewing the lease (the work is over, whatever comes of it). */
  stop(): void;
}

/** Whether `store` has fenced leases (`acquire`, `renew`, `markUnrecorded`, fenced writes): every store of this package. */
export function isLeased(
  store: IdempotencyStore<unknown>,
): store is LeasedIdempotencyStore<unknown> {
  const candidate = store as Partial<LeasedIdempotencyStore<unknown>>;
  return (
    typeof candidate.acquire === 'function' &&
    typeof candidate.renew === 'function' &&
    typeof candidate.markUnrecorded === 'function'
  );
}

// One class for every owner: its methods are shared, so a claim builds one object, not a closure
// per operation.
class KeyOwnership implements Ownership {
  readonly owner: KeyOwner;
  readonly takenOver: boolean;
  readonly #store: IdempotencyStore<unknown>;
  readonly #leased: LeasedIdempotencyStore<unknown> | undefined;
  readonly #settings: Pick<ClaimSettings, 'leaseSeconds' | 'now'>;
  readonly #beat: Heartbeat | undefined;

  constructor(
    store: IdempotencyStore<unknown>,
    owner: KeyOwner,
    takenOver: boolean,
    settings: Pick<ClaimSettings, 'leaseSeconds' | 'now'>,
  ) {
    this.owner = owner;
    this.takenOver = takenOver;
    this.#store = store;
    this.#settings = settings;
    this.#leased = owner.fencingToken !== undefined && isLeased(store) ? store : undefined;
    this.#beat = this.#leased ? heartbeat(() => this.renew(), settings.leaseSeconds) : undefined;
  }

  async renew(): Promise<boolean> {
    const { key, fingerprint, fencingToken } = this.owner;
    if (!this.#leased || fencingToken === undefined) return false;
    return this.#leased.renew(
      key,
      fingerprint,
      fencingToken,
      this.#settings.now() + this.#settings.leaseSeconds,
    );
  }

  stop(): void {
    this.#beat?.stop();
  }

  async finish(answer: unknown): Promise<boolean> {
    this.stop();
    const { key, fingerprint, fencingToken } = this.owner;
    return this.#leased
      ? this.#leased.finish(key, fingerprint, answer, fencingToken)
      : this.#store.finish(key, fingerprint, answer);
  }

  async release(): Promise<void> {
    this.stop();
    const { key, fingerprint, fencingToken } = this.owner;
    if (this.#leased) await this.#leased.release(key, fingerprint, fencingToken);
    else await this.#store.release(key, fingerprint);
  }

  async abandon(error: unknown, message: string): Promise<void> {
    try {
      await this.release();
    } catch (releaseError) {
      throw new AggregateError([error, releaseError], message);
    }
  }

  async markUnrecorded(): Promise<void> {
    this.stop();
    const { key, fingerprint, fencingToken } = this.owner;
    if (this.#leased && fencingToken !== undefined) {
      await this.#leased.markUnrecorded(key, fingerprint, fencingToken);
    }
  }

  async superseded(): Promise<boolean> {
    if (!this.#leased) return false;
    const { key, fingerprint, fencingToken } = this.owner;
    try {
      const row = await this.#leased.get(key);
      return row !== null && row.fingerprint === fingerprint && row.fencingToken !== fencingToken;
    } catch {
      return false;
    }
  }

  async transact<TX, R>(
    runner: TransactionRunner<TX>,
    handler: (tx: TX) => R | Promise<R>,
    record: (result: R) => string,
  ): Promise<TransactionOutcome<R>> {
    try {
      return await runner.run(this.owner, handler, record);
    } finally {
      this.stop();
    }
  }
}

/**
 * The {@link Ownership} of `owner` on `store`. With a fencing token (`owner.fencingToken`, from
 * `acquire` on a store with leases) its lease is renewed from now on; without one (`reserve`) the
 * writes are the unfenced ones.
 */
export function ownership(
  store: IdempotencyStore<unknown>,
  owner: KeyOwner,
  takenOver: boolean,
  settings: Pick<ClaimSettings, 'leaseSeconds' | 'now'>,
): Ownership {
  return new KeyOwnership(store, owner, takenOver, settings);
}
