import type { KeyStatus } from './status.js';

/** A value, or a promise of it: SQLite stores answer synchronously, Postgres stores asynchronously. */
export type MaybePromise<T> = T | Promise<T>;

/** Everything the store keeps about one key. */
export interface IdempotencyRecord<T> {
  /** The idempotency key. */
  readonly key: string;
  /** The fingerprint of the request payload that reserved the key. */
  readonly fingerprint: string;
  /** `pending` while the owner works, `done` once its answer is stored. */
  readonly status: KeyStatus;
  /** The retention deadline, in seconds on the caller's clock. */
  readonly expires: number;
  /** The stored answer; `null` while pending. */
  readonly response: T | null;
  /**
   * The deadline of the pending owner's lease, in seconds on the caller's clock; `null` when the
   * row has no lease (reserved by `reserve`, or marked unrecorded). Meaningless once `done`.
   */
  readonly leaseUntil: number | null;
  /**
   * The fencing token of the row's ownership (kept in the column `attempt`): a
   * fresh claim by `acquire` gets a new random token (`nextFencingToken`, 50 random bits), each
   * takeover a greater one, so a token names one ownership of the key for the key's whole life,
   * across its deletion and reuse. It is not a count; `takenOver` tells a takeover. Rows made by
   * the lease-less `reserve` carry 1, a value `acquire` never hands out.
   */
  readonly fencingToken: number;
  /**
   * The handler ran but its answer was not recorded: the key is never taken over automatically,
   * only released by hand.
   */
  readonly unrecorded: boolean;
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

/** What {@link LeasedIdempotencyStore.stats} counts: {@link RetentionStats} plus the leases. */
export interface LeaseStats extends RetentionStats {
  /** `pending` rows whose lease has lapsed (`leaseUntil <= now`): the next retry takes them over. */
  readonly lapsed: number;
  /** `pending` rows marked unrecorded: they wait for an operator. */
  readonly unrecorded: number;
}

/** Options of {@link LeasedIdempotencyStore.acquire}. */
export interface AcquireOptions {
  /** The retention deadline of the row, as for `reserve`. */
  readonly expires: number;
  /** The caller's clock now: a lease with `leaseUntil <= now` has lapsed. */
  readonly now: number;
  /** How long the lease lasts from `now`, in seconds: a finite number greater than 0. */
  readonly leaseSeconds: number;
  /**
   * Claim a key whose row is a `done` answer past its `expires` at `now` (not yet swept) as if it
   * were new: one fenced statement replaces the row with this caller's pending one, so of
   * concurrent callers one wins. Default `false`: such a key answers `done` (expired).
   */
  readonly replaceExpired?: boolean;
}

/**
 * What {@link LeasedIdempotencyStore.acquire} found, discriminated by `status`:
 *
 * - `acquired`: the caller owns the key with the fencing token `fencingToken` until `leaseUntil`;
 *   `takenOver` when it took over a lapsed lease (the handler may have run before).
 * - `done`: an answer is stored under the same fingerprint. Replay it only while
 *   `record.expires > now`.
 * - `inProgress`: another owner holds the key (its lease is live, or the row has no lease, or it is
 *   marked unrecorded).
 * - `mismatch`: the key is held under another fingerprint, pending or done.
 */
export type AcquireResult<T> =
  | {
      readonly status: 'acquired';
      readonly fencingToken: number;
      readonly leaseUntil: number;
      readonly takenOver: boolean;
    }
  | { readonly status: 'done'; readonly record: IdempotencyRecord<T> }
  | {
      readonly status: 'inProgress';
      readonly fencingToken: number;
      readonly leaseUntil: number | null;
      readonly unrecorded: boolean;
    }
  | { readonly status: 'mismatch'; readonly record: IdempotencyRecord<T> };

/**
 * The lease state of a pending row at a moment:
 * - `live`: its owner's lease runs past now;
 * - `lapsed`: the lease ended; the next `acquire` with the same fingerprint takes it over;
 * - `unrecorded`: the handler ran but its answer was not recorded; never taken over;
 * - `unleased`: reserved by the lease-less `reserve`; never taken over.
 */
export type LeaseState = 'live' | 'lapsed' | 'unrecorded' | 'unleased';

/** A pending row as the operator tools list it. */
export interface PendingKey {
  readonly key: string;
  readonly fingerprint: string;
  /** The retention deadline. */
  readonly expires: number;
  readonly leaseUntil: number | null;
  /** The fencing token of the row's ownership (see {@link IdempotencyRecord.fencingToken}). */
  readonly fencingToken: number;
  readonly state: LeaseState;
}

/** Options of {@link LeasedIdempotencyStore.pendingKeys}. */
export interface PendingKeysOptions {
  /** The moment lease states are judged at. */
  readonly now: number;
  /**
   * Only the rows that need a look: lapsed, unrecorded, or unleased past their `expires`. Default
   * `false`: every pending row. Anything but a boolean is refused with `InvalidOptionError`.
   */
  readonly stale?: boolean;
  /**
   * At most this many rows, ascending by key: an integer from 1 to 10,000, or `InvalidLimitError`.
   * Default 100.
   */
  readonly limit?: number;
  /**
   * Only the keys that start with this text, e.g. `storedId('client-7', '')` for one scope's keys.
   * Default `''`: every key.
   */
  readonly prefix?: string;
}

/** What {@link LeasedIdempotencyStore.releasePending} did. */
export type ReleasePendingResult = 'released' | 'missing' | 'done' | 'mismatch';

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
  reserve(key: string, fingerprint: string, expires: number): MaybePromise<boolean>;
  /**
   * Stores `response` on the row with this key, this fingerprint and status `pending`, making it
   * `done`. Returns `false` and changes nothing for any other row.
   */
  finish(key: string, fingerprint: string, response: T): MaybePromise<boolean>;
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
  /**
   * The time budget in milliseconds by which `sweep` sizes its batches when it is given neither
   * `batchSize` nor `batchMillis`. Set by the stores whose sweep batch holds the whole database's
   * write lock inside this process (a SQLite file opened here): a batch that outlasts a waiting
   * writer's first busy-handler steps costs that writer the next, longer step, so the batch is cut
   * by time. Absent where a batch locks only its own rows (PostgreSQL, MySQL: a writer of another
   * key never waits for it) or where the time measured would be mostly a network round trip (D1,
   * libSQL): there a batch keeps 100 rows.
   */
  readonly sweepBatchMillis?: number;
  /** Counts by status and past `now`, for operators. */
  stats(now: number): MaybePromise<RetentionStats>;
  /** Deletes the row only if it is `pending` with this fingerprint. For an owner whose work failed. */
  release(key: string, fingerprint: string): MaybePromise<boolean>;
  /** The whole record of `key`, or `null`. */
  get(key: string): MaybePromise<IdempotencyRecord<T> | null>;
  /**
   * Releases the store's resources once every call made before it has run to its end (its writes
   * committed); calls made after it throw `StoreClosedError`.
   */
  close(): MaybePromise<void>;
}

/**
 * A store with fenced leases on pending keys: an owner that dies or freezes loses its key when
 * its lease lapses, the next caller with the same fingerprint takes it over with a new fencing
 * token (`fencingToken`), and every write of the old owner carrying the old token changes nothing.
 * A token names one ownership of the key for the key's whole life: a key released (by its owner
 * or an operator) and claimed again gets a token greater than every one it had before, so an old
 * owner's fenced writes never land on the new ownership's row either.
 *
 * ```
 *  acquire ──▶ pending(token t, lease) ──finish(…, t)──▶ done
 *                 │   ▲ renew(…, t)
 *                 │ lease lapses, acquire with the same fingerprint
 *                 ▼
 *              pending(token u > t, lease) ── finish(…, t) is refused; finish(…, u) stores
 * ```
 *
 * Rows made by the lease-less `reserve` have no lease and are never taken over; nor are rows
 * marked unrecorded: an operator lists them with `pendingKeys` and releases them with
 * `releasePending`.
 *
 * @typeParam T - the type of the stored responses
 */
export interface LeasedIdempotencyStore<T = unknown> extends IdempotencyStore<T> {
  /**
   * In one atomic step: inserts a missing key as pending with a lease until
   * `now + leaseSeconds` and a fresh random fencing token; or takes over a pending
   * row with the same fingerprint whose lease has lapsed (`leaseUntil <= now`, not unrecorded),
   * raising its token above both its old one and a fresh one; or reports what is there. Of many
   * concurrent contenders exactly one acquires.
   */
  acquire(
    key: string,
    fingerprint: string,
    options: AcquireOptions,
  ): MaybePromise<AcquireResult<T>>;
  /**
   * Extends the lease of the owner holding `fencingToken` to `leaseUntil`. `false`, changing
   * nothing, once the key was taken over, finished, released or marked unrecorded.
   */
  renew(
    key: string,
    fingerprint: string,
    fencingToken: number,
    leaseUntil: number,
  ): MaybePromise<boolean>;
  /**
   * As {@link IdempotencyStore.finish}; with `fencingToken`, only while the row still carries that
   * fencing token, so an owner whose key was taken over cannot store its answer.
   */
  finish(
    key: string,
    fingerprint: string,
    response: T,
    fencingToken?: number,
  ): MaybePromise<boolean>;
  /**
   * As {@link IdempotencyStore.release}; with `fencingToken`, only while the row carries that token
   * and is not marked unrecorded.
   */
  release(key: string, fingerprint: string, fencingToken?: number): MaybePromise<boolean>;
  /**
   * Marks the pending row held with `fencingToken` as unrecorded (the handler ran, its answer could
   * not be stored) and drops its lease: never taken over, listed for an operator.
   */
  markUnrecorded(key: string, fingerprint: string, fencingToken: number): MaybePromise<boolean>;
  /** Pending rows with their lease state, ascending by key. */
  pendingKeys(options: PendingKeysOptions): MaybePromise<PendingKey[]>;
  /**
   * The operator's release: deletes the pending row of `key` (with `fingerprint` if given),
   * whatever its lease. A done row, a missing key or another fingerprint changes nothing.
   */
  releasePending(key: string, fingerprint?: string): MaybePromise<ReleasePendingResult>;
  /** {@link IdempotencyStore.stats} plus the lapsed and unrecorded pending rows. */
  stats(now: number): MaybePromise<LeaseStats>;
}
