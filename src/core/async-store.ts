import { InvalidOptionError, StoreClosedError } from './errors.js';
import { nextFencingToken } from './fencing-token.js';
import { parseResponse, serializeResponse } from './json.js';
import {
  acquiredOutcome,
  assertAttempt,
  existingOutcome,
  leaseDeadline,
  pendingLimit,
  pendingPrefix,
  readOutcome,
  toPendingKey,
} from './lease.js';
import { compareKeys } from './order.js';
import { holdsOwnAnswer, type KeyRow, toRecord } from './record.js';
import { RETENTION_CYCLE } from './retention-cycle.js';
import { countByStatus, KeyStatus } from './status.js';
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
} from './store.js';
import {
  assertDigest,
  assertIntegerOption,
  assertKey,
  assertLimit,
  assertTime,
  DEFAULT_LIMIT,
  MAX_BATCH_SIZE,
} from './validation.js';

/**
 * What a dialect's `acquire` statements found: the fencing token of the row they inserted (the
 * fresh token they were given) or took over (another one), or else the row as it stands
 * (`undefined` when it was deleted in between, so the key is new again and the store tries once
 * more).
 */
export type AcquireStep =
  | { readonly attempt: number | string }
  | { readonly row: KeyRow | undefined };

/**
 * What a dialect's `releasePending` statements found: the pending row deleted, or else the row of
 * the key as the delete left it (`undefined` when there is none).
 */
export type PendingRelease =
  | { readonly released: true }
  | { readonly released: false; readonly row: KeyRow | undefined };

/** The checked options of `pendingKeys`. */
export interface PendingQuery {
  /** The moment lease states are judged at. */
  readonly now: number;
  /** Only the rows that need an operator's look. */
  readonly stale: boolean;
  /** At most this many rows. */
  readonly limit: number;
  /** Only ids starting with this text; `''` for all. */
  readonly prefix: string;
}

/** A `GROUP BY status` row of the `stats` statement; counts as the driver gives them. */
export interface StatsRow {
  readonly status: string;
  /** All rows of the status. */
  readonly count: number | string;
  /** The rows with `expires <= now`. */
  readonly past: number | string;
  /** The rows not marked unrecorded whose lease ended by `now`. */
  readonly lapsed: number | string | null;
  /** The rows marked unrecorded. */
  readonly unrecorded: number | string | null;
}

/**
 * One dialect's statements, run as they are: the values are already checked and the store is
 * open. A write answers the number of rows it changed; a read, the rows as the driver gives them.
 * The dialect keeps what is its own here (how it runs a statement, retries a deadlock victim, or
 * holds its write lock); {@link AsyncIdempotencyStore} checks the arguments and reads the answers.
 */
export interface KeyStatements {
  /** Inserts `key` as pending unless it exists. */
  reserve(key: string, digest: string, expires: number): Promise<number>;
  /** Stores the serialized `response` on the pending row of `key` and `digest`. */
  finish(key: string, digest: string, response: string): Promise<number>;
  /** As `finish`, only while the row carries `attempt`. */
  finishFenced(key: string, digest: string, response: string, attempt: number): Promise<number>;
  /** Deletes the pending row of `key` and `digest`. */
  release(key: string, digest: string): Promise<number>;
  /** As `release`, only while the row carries `attempt` and is not marked unrecorded. */
  releaseFenced(key: string, digest: string, attempt: number): Promise<number>;
  /** Moves the lease of the owner holding `attempt` to `leaseUntil`. */
  renew(key: string, digest: string, attempt: number, leaseUntil: number): Promise<number>;
  /** Marks the pending row held with `attempt` as unrecorded and drops its lease. */
  markUnrecorded(key: string, digest: string, attempt: number): Promise<number>;
  /**
   * Inserts the key with the fencing token `token`, or takes over its lapsed lease with the token
   * `takeoverToken` computes from the row's and `token`, or reads what is there.
   */
  acquire(
    key: string,
    digest: string,
    lease: {
      readonly expires: number;
      readonly now: number;
      readonly leaseUntil: number;
      readonly token: number;
    },
  ): Promise<AcquireStep>;
  /** The pending rows, ascending by key. */
  pendingKeys(query: PendingQuery): Promise<readonly KeyRow[]>;
  /** Deletes the pending row of `key` (of `fingerprint` when given), whatever its lease. */
  releasePending(key: string, fingerprint: string | undefined): Promise<PendingRelease>;
  /** The stored answer of the done row of `key` with `expires > now`, as text. */
  fetch(key: string, now: number): Promise<string | null | undefined>;
  /** The row of `key`. */
  get(key: string): Promise<KeyRow | undefined>;
  /** The ids of done rows with `expires <= now`, ascending, at most `limit`. */
  expired(now: number, limit: number): Promise<readonly { readonly id: string }[]>;
  /** Deletes what `expired` would list and answers the ids it deleted, in any order. */
  purge(now: number, limit: number): Promise<readonly { readonly id: string }[]>;
  /** Deletes up to `batchSize` expired answers in index order; the number deleted. */
  sweepBatch(now: number, batchSize: number): Promise<number>;
  /** The `GROUP BY status` counts. */
  counts(): Promise<readonly { readonly status: string; readonly count: number | string }[]>;
  /** The `GROUP BY status` counts at `now`. */
  stats(now: number): Promise<readonly StatsRow[]>;
  /** Called once by the first `close()`. */
  close?(): unknown;
  /** Checks the options of `pendingKeys`; {@link readPendingOptions} when not given. */
  readPendingOptions?(options: PendingKeysOptions): PendingQuery;
}

/**
 * Checks the options of `pendingKeys`, the same on every dialect: an object, `now` a finite time,
 * `stale` a boolean (`false` when not given), `limit` within range (100 when not given), `prefix`
 * a well-formed string (`''` when not given). Nothing is read loosely: `stale: 'no'` would
 * otherwise list the stale rows only.
 *
 * @throws {@link InvalidOptionError} for options that are not an object, or a `stale` that is not
 * a boolean
 * @throws {@link InvalidTimeError} for a `now` that is not a finite number
 * @throws {@link InvalidLimitError} for a `limit` out of range
 */
export function readPendingOptions(options: PendingKeysOptions): PendingQuery {
  if (typeof options !== 'object' || options === null) {
    throw new InvalidOptionError('pendingKeys takes { now, stale?, limit?, prefix? }');
  }
  const { now, stale = false } = options;
  assertTime(now, 'now');
  if (typeof stale !== 'boolean') {
    throw new InvalidOptionError(`stale must be a boolean, got ${typeof stale}`);
  }
  return { now, stale, limit: pendingLimit(options.limit), prefix: pendingPrefix(options) };
}

/**
 * A {@link LeasedIdempotencyStore} whose every operation returns a promise, over one dialect's
 * {@link KeyStatements}. Each operation checks its arguments, in the same order on every dialect,
 * then refuses to run on a closed store, then runs the dialect's statements and turns their
 * answer into the result; so every asynchronous dialect throws the same typed errors and answers
 * alike.
 *
 * @typeParam T - the type of the stored responses
 */
export class AsyncIdempotencyStore<T = unknown> implements LeasedIdempotencyStore<T> {
  readonly #statements: KeyStatements;
  #closed = false;

  /** @param statements - the dialect's statements, see {@link KeyStatements} */
  constructor(statements: KeyStatements) {
    this.#statements = statements;
  }

  #open(): KeyStatements {
    if (this.#closed) throw new StoreClosedError();
    return this.#statements;
  }

  #checkKey(key: unknown): asserts key is string {
    assertKey(key);
  }

  #checkDigest(digest: unknown): asserts digest is string {
    assertDigest(digest);
  }

  /** {@inheritDoc IdempotencyStore.reserve} */
  async reserve(key: string, digest: string, expires: number): Promise<boolean> {
    this.#checkKey(key);
    this.#checkDigest(digest);
    assertTime(expires, 'expires');
    return (await this.#open().reserve(key, digest, expires)) === 1;
  }

  /** {@inheritDoc LeasedIdempotencyStore.finish} */
  async finish(key: string, digest: string, response: T, attempt?: number): Promise<boolean> {
    this.#checkKey(key);
    this.#checkDigest(digest);
    if (attempt !== undefined) assertAttempt(attempt);
    const text = serializeResponse(response);
    const statements = this.#open();
    if (attempt === undefined) return (await statements.finish(key, digest, text)) === 1;
    if ((await statements.finishFenced(key, digest, text, attempt)) === 1) return true;
    return holdsOwnAnswer(await statements.get(key), digest, attempt, text);
  }

  /** {@inheritDoc LeasedIdempotencyStore.acquire} */
  async acquire(key: string, digest: string, options: AcquireOptions): Promise<AcquireResult<T>> {
    this.#checkKey(key);
    this.#checkDigest(digest);
    const leaseUntil = leaseDeadline(options);
    const statements = this.#open();
    const read = readOutcome<T>(await statements.get(key), digest, options.now);
    if (read !== undefined) return read;
    for (;;) {
      const token = nextFencingToken();
      const lease = { expires: options.expires, now: options.now, leaseUntil, token };
      const step = await statements.acquire(key, digest, lease);
      if ('attempt' in step) return acquiredOutcome(step.attempt, token, leaseUntil);
      if (step.row !== undefined) return existingOutcome<T>(step.row, digest);
    }
  }

  /** {@inheritDoc LeasedIdempotencyStore.renew} */
  async renew(key: string, digest: string, attempt: number, leaseUntil: number): Promise<boolean> {
    this.#checkKey(key);
    this.#checkDigest(digest);
    assertAttempt(attempt);
    assertTime(leaseUntil, 'leaseUntil');
    return (await this.#open().renew(key, digest, attempt, leaseUntil)) === 1;
  }

  /** {@inheritDoc LeasedIdempotencyStore.markUnrecorded} */
  async markUnrecorded(key: string, digest: string, attempt: number): Promise<boolean> {
    this.#checkKey(key);
    this.#checkDigest(digest);
    assertAttempt(attempt);
    return (await this.#open().markUnrecorded(key, digest, attempt)) === 1;
  }

  /** {@inheritDoc LeasedIdempotencyStore.pendingKeys} */
  async pendingKeys(options: PendingKeysOptions): Promise<PendingKey[]> {
    const query = (this.#statements.readPendingOptions ?? readPendingOptions)(options);
    const rows = await this.#open().pendingKeys(query);
    return rows.map((row) => toPendingKey(row, query.now));
  }

  /** {@inheritDoc LeasedIdempotencyStore.releasePending} */
  async releasePending(key: string, fingerprint?: string): Promise<ReleasePendingResult> {
    this.#checkKey(key);
    if (fingerprint !== undefined) this.#checkDigest(fingerprint);
    const found = await this.#open().releasePending(key, fingerprint);
    if (found.released) return 'released';
    if (found.row === undefined) return 'missing';
    return found.row.status === KeyStatus.done ? 'done' : 'mismatch';
  }

  /** {@inheritDoc IdempotencyStore.fetch} */
  async fetch(key: string, now: number): Promise<T | null> {
    this.#checkKey(key);
    assertTime(now, 'now');
    const text = await this.#open().fetch(key, now);
    return text == null ? null : parseResponse<T>(text);
  }

  /** {@inheritDoc IdempotencyStore.expired} */
  async expired(now: number, limit: number = DEFAULT_LIMIT): Promise<string[]> {
    assertLimit(limit);
    assertTime(now, 'now');
    const rows = await this.#open().expired(now, limit);
    return rows.map((row) => row.id);
  }

  /** {@inheritDoc IdempotencyStore.purge} */
  async purge(now: number, limit: number = DEFAULT_LIMIT): Promise<string[]> {
    assertLimit(limit);
    assertTime(now, 'now');
    const rows = await this.#open().purge(now, limit);
    return rows.map((row) => row.id).sort(compareKeys);
  }

  /** {@inheritDoc IdempotencyStore.counts} */
  async counts(): Promise<StatusCounts> {
    return countByStatus(await this.#open().counts());
  }

  /** {@inheritDoc IdempotencyStore.sweepBatch} */
  async sweepBatch(now: number, batchSize: number): Promise<number> {
    assertIntegerOption(batchSize, 'batchSize', 1, MAX_BATCH_SIZE);
    assertTime(now, 'now');
    return this.#open().sweepBatch(now, batchSize);
  }

  /** {@inheritDoc LeasedIdempotencyStore.stats} */
  async stats(now: number): Promise<LeaseStats> {
    assertTime(now, 'now');
    const rows = await this.#open().stats(now);
    const past = countByStatus(rows.map((row) => ({ status: row.status, count: row.past })));
    const pending = rows.find((row) => row.status === KeyStatus.pending);
    return {
      ...countByStatus(rows),
      expired: past.done,
      stalePending: past.pending,
      lapsed: Number(pending?.lapsed ?? 0),
      unrecorded: Number(pending?.unrecorded ?? 0),
    };
  }

  /** {@inheritDoc LeasedIdempotencyStore.release} */
  async release(key: string, digest: string, attempt?: number): Promise<boolean> {
    this.#checkKey(key);
    this.#checkDigest(digest);
    if (attempt !== undefined) assertAttempt(attempt);
    const statements = this.#open();
    const changed =
      attempt === undefined
        ? await statements.release(key, digest)
        : await statements.releaseFenced(key, digest, attempt);
    return changed === 1;
  }

  /** {@inheritDoc IdempotencyStore.get} */
  async get(key: string): Promise<IdempotencyRecord<T> | null> {
    this.#checkKey(key);
    const row = await this.#open().get(key);
    return row === undefined ? null : toRecord<T>(row);
  }

  /** {@inheritDoc IdempotencyStore.retentionCycle} */
  async retentionCycle(key: string): Promise<boolean> {
    this.#checkKey(key);
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
    await this.#statements.close?.();
  }
}
