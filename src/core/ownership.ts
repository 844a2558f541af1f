import type { ClaimSettings } from './claim-options.js';
import { encryptionOf } from './encryption.js';
import { OutcomeUnknownError } from './errors.js';
import { type Heartbeat, heartbeat } from './heartbeat.js';
import type { LeasedIdempotencyStore } from './store.js';
import type { KeyOwner, TransactionOutcome, TransactionRunner } from './transaction-runner.js';

/**
 * A key the claim engine won: what its owner may do with it until the work is done. The lease is
 * renewed in the background from the claim on, every write carries the fencing token, and the
 * first of `finish`, `release`, `abandon` or `markUnrecorded` (or the end of `transact`) stops
 * the renewal.
 */
export interface Ownership {
  /** The key, the fingerprint it was claimed with and the fencing token. */
  readonly owner: KeyOwner;
  /**
   * Whether the claim took the key over from an owner whose lease lapsed; `false` for a fresh
   * key.
   */
  readonly takenOver: boolean;
  /**
   * Records `answer` on the owner's pending row. `false` when that row is gone or no longer the
   * owner's (released by hand, or taken over after its lease lapsed). Throws what the store
   * throws.
   */
  finish(answer: unknown): Promise<boolean>;
  /**
   * Deletes the owner's pending row (never another owner's or a stored answer), so a retry runs.
   */
  release(): Promise<void>;
  /**
   * The work failed with `error`: releases the key, or, for an {@link OutcomeUnknownError}, marks
   * it unrecorded (see {@link Ownership.markUnrecorded}) so it waits for an operator. Resolves
   * once released; rejects with an `AggregateError` of `error` and the store's error, with
   * `message`, when releasing fails.
   */
  abandon(error: unknown, message: string): Promise<void>;
  /**
   * The work ran but its answer cannot be recorded: marks the row so no retry takes it over (that
   * would run the effect again) and an operator sees it. Throws what the store throws.
   */
  markUnrecorded(): Promise<void>;
  /**
   * Extends the lease by `leaseSeconds` from now; `false` when the row is no longer the owner's.
   */
  renew(): Promise<boolean>;
  /**
   * Whether a retry took the key over while the work ran: the row holds the same fingerprint under
   * a newer fencing token. `false` when the row cannot be read.
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
  /**
   * The work failed after recording steps: ends the lease now instead of deleting the row, so the
   * recorded steps stay and the next owner (a retry, the completer) goes on from them. Throws what
   * the store throws.
   */
  lapse(): Promise<void>;
}

// One class for every owner: its methods are shared, so a claim builds one object, not a closure
// per operation.
class KeyOwnership implements Ownership {
  readonly owner: KeyOwner;
  readonly takenOver: boolean;
  readonly #store: LeasedIdempotencyStore<unknown>;
  readonly #settings: Pick<ClaimSettings, 'leaseSeconds' | 'now'>;
  readonly #beat: Heartbeat;

  constructor(
    store: LeasedIdempotencyStore<unknown>,
    owner: KeyOwner,
    takenOver: boolean,
    settings: Pick<ClaimSettings, 'leaseSeconds' | 'now'>,
  ) {
    this.owner = owner;
    this.takenOver = takenOver;
    this.#store = store;
    this.#settings = settings;
    this.#beat = heartbeat(() => this.renew(), settings.leaseSeconds);
  }

  async renew(): Promise<boolean> {
    const { key, fingerprint, fencingToken } = this.owner;
    return this.#store.renew(
      key,
      fingerprint,
      fencingToken,
      this.#settings.now() + this.#settings.leaseSeconds,
    );
  }

  stop(): void {
    this.#beat.stop();
  }

  async lapse(): Promise<void> {
    this.stop();
    const { key, fingerprint, fencingToken } = this.owner;
    await this.#store.renew(key, fingerprint, fencingToken, this.#settings.now());
  }

  async finish(answer: unknown): Promise<boolean> {
    this.stop();
    const { key, fingerprint, fencingToken } = this.owner;
    return this.#store.finish(key, fingerprint, answer, fencingToken);
  }

  async release(): Promise<void> {
    this.stop();
    const { key, fingerprint, fencingToken } = this.owner;
    await this.#store.release(key, fingerprint, fencingToken);
  }

  async abandon(error: unknown, message: string): Promise<void> {
    try {
      // The work may have had its effect: a released key would let a retry run it again.
      if (error instanceof OutcomeUnknownError) await this.markUnrecorded();
      else await this.release();
    } catch (releaseError) {
      throw new AggregateError([error, releaseError], message);
    }
  }

  async markUnrecorded(): Promise<void> {
    this.stop();
    const { key, fingerprint, fencingToken } = this.owner;
    await this.#store.markUnrecorded(key, fingerprint, fencingToken);
  }

  async superseded(): Promise<boolean> {
    const { key, fingerprint, fencingToken } = this.owner;
    try {
      const row = await this.#store.get(key);
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
    const encryption = encryptionOf(this.#store);
    const { key } = this.owner;
    // The answer is sealed where it is recorded, inside the transaction: at once for a synchronous
    // runner (its transaction cannot wait for a promise), with WebCrypto for the others.
    const stored =
      encryption === undefined
        ? record
        : runner.synchronous
          ? (result: R) => encryption.sealSync(key, record(result))
          : (result: R) => encryption.seal(key, record(result));
    try {
      return await runner.run(this.owner, handler, stored);
    } finally {
      this.stop();
    }
  }
}

/**
 * The {@link Ownership} of `owner` on `store`, its fencing token from `acquire`: its lease is
 * renewed from now on, and every write carries the token.
 */
export function ownership(
  store: LeasedIdempotencyStore<unknown>,
  owner: KeyOwner,
  takenOver: boolean,
  settings: Pick<ClaimSettings, 'leaseSeconds' | 'now'>,
): Ownership {
  return new KeyOwnership(store, owner, takenOver, settings);
}
