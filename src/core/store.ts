import type { KeyStatus } from './status.js';

/** A value, or a promise of it: SQLite stores answer synchronously, Postgres stores asynchronously. */
export type MaybePromise<T> = T | Promise<T>;

/** Everything the store keeps about one key. */
export interface IdempotencyRecord<T> {
  /** The idempotency key. */
  readonly key: string;
  /** The digest of the request payload that reserved the key. */
  readonly fingerprint: string;
  /** `pending` while the owner works, `done` once its answer is stored. */
  readonly status: KeyStatus;
  /** The retention deadline, in seconds on the caller's clock. */
  readonly expires: number;
  /** The stored answer; `null` while pending. */
  readonly response: T | null;
}

/** The number of rows in each state. Both keys are always present. */
export interface StatusCounts {
  /** Rows whose work is in flight. */
  readonly pending: number;
  /** Rows holding a stored answer, expired or not. */
  readonly done: number;
}

/** What retention sees at one moment: {@link StatusCounts} plus the rows past their deadline. */
export interface RetentionStats extends StatusCounts {
  /** `done` rows with `expires <= now`: the backlog a purge or sweep deletes. */
  readonly expired: number;
  /**
   * `pending` rows with `expires <= now`. Never deleted by retention: reported so a human can look
   * at work that may have been abandoned.
   */
  readonly stalePending: number;
}

/**
 * The operations every dialect provides, with the same semantics. Times are numbers on the
 * caller's clock (seconds, by convention); the store never reads a clock of its own.
 *
 * ```
 *  reserve ──▶ pending ──finish──▶ done ──(expires <= now)──▶ purge deletes it
 *                 │                  │
 *              release            fetch replays while expires > now
 *                 ▼
 *              (gone: the key is new again)
 * ```
 *
 * Retention (`expired`, `purge`) only ever selects `done` rows: a `pending` row belongs to the
 * worker that reserved it, whatever its `expires` says.
 *
 * @typeParam T - the type of the stored responses
 */
export interface IdempotencyStore<T = unknown> {
  /**
   * Inserts `key` as `pending` unless it exists. Of many concurrent reserves of one key, exactly
   * one returns `true`. An existing key, expired or not, is left unchanged and gives `false`.
   */
  reserve(key: string, digest: string, expires: number): MaybePromise<boolean>;
  /**
   * Stores `response` on the row with this key, this fingerprint and status `pending`, making it
   * `done`. Returns `false` and changes nothing for any other row.
   */
  finish(key: string, digest: string, response: T): MaybePromise<boolean>;
  /** The stored answer of a `done` row with `expires > now`, or `null`. */
  fetch(key: string, now: number): MaybePromise<T | null>;
  /** Ids of `done` rows with `expires <= now`, ascending, at most `limit` (1–100, default 10). */
  expired(now: number, limit?: number): MaybePromise<string[]>;
  /** Deletes what `expired` would list, in one transaction, and returns the ids it deleted. */
  purge(now: number, limit?: number): MaybePromise<string[]>;
  /** The number of `pending` and `done` rows. */
  counts(): MaybePromise<StatusCounts>;
  /**
   * Deletes up to `batchSize` `done` rows with `expires <= now` in one short transaction, taking
   * them in index order `(expires, id)` so no batch sorts the backlog, and returns how many it
   * deleted. The building block of `sweep`; `batchSize` is an integer from 1 to 10,000.
   */
  sweepBatch(now: number, batchSize: number): MaybePromise<number>;
  /** Counts by status and past `now`, for operators. */
  stats(now: number): MaybePromise<RetentionStats>;
  /** Deletes the row only if it is `pending` with this fingerprint. For an owner whose work failed. */
  release(key: string, digest: string): MaybePromise<boolean>;
  /** The whole record of `key`, or `null`. */
  get(key: string): MaybePromise<IdempotencyRecord<T> | null>;
  /**
   * Reserves `key` with `'v1'` until 10, finishes it with `{ receipt: 1 }`, purges at `now = 10`,
   * then reserves it with `'v2'` until 20 and returns that result. On an empty store it is `true`:
   * once its answer is purged a key is a new request, which is why retention must outlast retries.
   */
  retentionCycle(key: string): MaybePromise<boolean>;
  /** Releases the store's resources; later calls throw `StoreClosedError`. */
  close(): MaybePromise<void>;
}
