/**
 * The batched retention sweep: empties the backlog of expired answers in short transactions.
 *
 * @module
 */
import { performance } from 'node:perf_hooks';
import { setImmediate as nextTurn } from 'node:timers/promises';
import { InvalidOptionError } from './core/errors.js';
import type { IdempotencyStore } from './core/store.js';
import { assertIntegerOption, assertTime, MAX_BATCH_SIZE } from './core/validation.js';

export { DEFAULT_BATCH_MILLIS } from './core/validation.js';

/**
 * The rows of each batch when no `batchSize` is given, or of the first one when batches are sized
 * by a time budget (`batchMillis`, or the store's `sweepBatchMillis`: {@link DEFAULT_BATCH_MILLIS}
 * on a SQLite file).
 */
export const DEFAULT_BATCH_SIZE = 100;

/** The largest `batchMillis` accepted: one minute. */
export const MAX_BATCH_MILLIS = 60_000;

/**
 * The fewest rows a batch sized by time shrinks to. Below it a batch's own cost (its transaction,
 * its commit) dominates, so smaller batches would only add commits without holding the lock less.
 */
export const MIN_TIMED_BATCH_SIZE = 10;

// A batch sized by time at most doubles the previous one, so one fast batch (a warm cache, an
// idle moment) cannot make the next one overshoot the budget by much.
const MAX_GROWTH = 2;

/** What a sweep needs from a store: any dialect's store provides it. */
export type SweepableStore = Pick<IdempotencyStore, 'sweepBatch' | 'stats' | 'sweepBatchMillis'>;

/** Progress reported after each batch, see {@link SweepOptions.onBatch}. */
export interface SweepProgress {
  /** Rows the batch that just ended deleted. */
  readonly batchDeleted: number;
  /** Rows deleted so far by this sweep. */
  readonly deleted: number;
  /** Batches run so far. */
  readonly batches: number;
  /** The expired backlog when the sweep started. */
  readonly backlog: number;
  /** Wall-clock seconds since the sweep started. */
  readonly seconds: number;
  /** The row limit the batch that just ended ran with. */
  readonly batchSize: number;
  /** Milliseconds the batch that just ended took, as the sweep measured it. */
  readonly batchMillis: number;
}

/** Options of {@link sweep}. */
export interface SweepOptions {
  /**
   * The time to sweep at, on the clock the application used for `expires`: every `done` row with
   * `expires <= now` is deleted. The same `now` is used for every batch.
   */
  readonly now: number;
  /**
   * Rows per batch, each batch in its own short transaction: an integer 1–10,000. Given alone,
   * every batch has exactly this limit, as with no time budget at all. Given with `batchMillis`, it
   * is the first batch's limit and the most any batch may have. Without either, batches follow the
   * store's `sweepBatchMillis`: on a SQLite file opened in this process the first batch has 100
   * rows and later ones are sized by a budget of {@link DEFAULT_BATCH_MILLIS} ms; on the other
   * stores (PostgreSQL, MySQL, D1, libSQL) every batch has 100 rows.
   */
  readonly batchSize?: number;
  /**
   * The time budget of a batch in milliseconds (a finite number greater than 0, at most 60,000):
   * after each batch the sweep sizes the next one so that, at the rate just measured, it takes
   * about this long: it shrinks at once after a slow batch, to no fewer than
   * {@link MIN_TIMED_BATCH_SIZE} rows (or `batchSize` if smaller), and grows at most twofold per
   * batch, to no more than `batchSize` (10,000 without it). The time measured is the whole
   * `sweepBatch` call (on SQLite, the transaction and the checkpoint after it, which holds no write
   * lock), so for a store across a network it includes the round trip: there, give a
   * larger budget or a fixed `batchSize`. Default: the store's `sweepBatchMillis` when `batchSize`
   * is not given either ({@link DEFAULT_BATCH_MILLIS} on a SQLite file, none elsewhere).
   */
  readonly batchMillis?: number;
  /** Stop after this many batches (a positive integer). */
  readonly maxBatches?: number;
  /**
   * Start no new batch once this many seconds of wall time have passed since the sweep started (a
   * positive number). A running batch is always finished, so the sweep may overrun by one batch.
   */
  readonly maxSeconds?: number;
  /**
   * Delete nothing; report the backlog in `remaining` and, in `wouldDelete`, how many rows a sweep
   * with the same `batchSize` and `maxBatches` would delete if nothing changed meanwhile.
   * `maxSeconds` and the sizes batches get from a time budget cannot be predicted: `maxSeconds` is
   * ignored and every batch counted at its largest limit, so `wouldDelete` is an upper bound.
   */
  readonly dryRun?: boolean;
  /** Aborting it stops the sweep once the current batch has committed. */
  readonly signal?: AbortSignal;
  /** Called after each batch (and awaited). An error it throws ends the sweep. */
  readonly onBatch?: (progress: SweepProgress) => void | Promise<void>;
  /**
   * A monotonic clock in milliseconds, used to time each batch, `maxSeconds` and `seconds`.
   * Default `performance.now`. Mostly for tests, which can make the batch times deterministic.
   */
  readonly clock?: () => number;
}

/** Why a sweep ended. */
export type SweepStop = 'drained' | 'maxBatches' | 'maxSeconds' | 'signal' | 'dryRun';

/** What a sweep did. */
export interface SweepResult {
  /** Rows deleted: `done` rows whose `expires <= now`. Never a `pending` row. */
  readonly deleted: number;
  /** Batches that deleted at least one row, each one committed transaction. */
  readonly batches: number;
  /** Wall-clock seconds the sweep took, counting the backlog counts before and after. */
  readonly seconds: number;
  /** The expired backlog left when the sweep ended (`stats(now).expired`). 0 once drained. */
  readonly remaining: number;
  /** The expired backlog when the sweep started. */
  readonly backlog: number;
  /**
   * Why the sweep ended: `drained` when a batch found fewer rows than its limit (the backlog was
   * empty at that moment), otherwise the limit that stopped it, or `dryRun`.
   */
  readonly stoppedBy: SweepStop;
  /** With `dryRun`: the rows a real sweep would delete. Otherwise 0. */
  readonly wouldDelete: number;
}

/**
 * Validates sweep options without touching any store, so a caller (such as the CLI) can refuse
 * bad input before it opens a database. {@link sweep} runs the same checks first.
 *
 * @throws {@link InvalidTimeError} for a `now` that is not a finite number
 * @throws {@link InvalidOptionError} for any other option out of range or of the wrong type
 */
export function validateSweepOptions(options: SweepOptions): void {
  if (typeof options !== 'object' || options === null) {
    throw new InvalidOptionError('sweep options must be an object with at least `now`');
  }
  assertTime(options.now, 'now');
  if (options.batchSize !== undefined) {
    assertIntegerOption(options.batchSize, 'batchSize', 1, MAX_BATCH_SIZE);
  }
  if (options.maxBatches !== undefined) {
    assertIntegerOption(options.maxBatches, 'maxBatches', 1, Number.MAX_SAFE_INTEGER);
  }
  const { maxSeconds } = options;
  if (
    maxSeconds !== undefined &&
    (typeof maxSeconds !== 'number' || !Number.isFinite(maxSeconds) || maxSeconds <= 0)
  ) {
    throw new InvalidOptionError(
      `maxSeconds must be a finite number greater than 0, got ${String(maxSeconds)}`,
    );
  }
  if (options.dryRun !== undefined && typeof options.dryRun !== 'boolean') {
    throw new InvalidOptionError(`dryRun must be a boolean, got ${typeof options.dryRun}`);
  }
  if (options.signal !== undefined && !(options.signal instanceof AbortSignal)) {
    throw new InvalidOptionError('signal must be an AbortSignal');
  }
  if (options.onBatch !== undefined && typeof options.onBatch !== 'function') {
    throw new InvalidOptionError('onBatch must be a function');
  }
  const { batchMillis } = options;
  if (
    batchMillis !== undefined &&
    (typeof batchMillis !== 'number' ||
      !Number.isFinite(batchMillis) ||
      batchMillis <= 0 ||
      batchMillis > MAX_BATCH_MILLIS)
  ) {
    throw new InvalidOptionError(
      `batchMillis must be a finite number greater than 0 and at most ${MAX_BATCH_MILLIS}, got ${String(batchMillis)}`,
    );
  }
  if (options.clock !== undefined && typeof options.clock !== 'function') {
    throw new InvalidOptionError('clock must be a function');
  }
}

/** How a sweep picks each batch's row limit. */
interface BatchSizing {
  readonly first: number;
  /** The largest limit any batch can get: what a dry run counts each batch at. */
  readonly most: number;
  /** The limit after a batch of `limit` rows that took `millis`. */
  readonly next: (limit: number, millis: number) => number;
}

function batchSizing(store: SweepableStore, options: SweepOptions): BatchSizing {
  const { batchSize } = options;
  // A store that holds a database-wide lock in process sizes by time unless the caller fixed the
  // rows; the others keep fixed batches, whose cost to a writer of another key is nothing.
  const budget =
    options.batchMillis ?? (batchSize === undefined ? store.sweepBatchMillis : undefined);
  if (budget === undefined) {
    const fixed = batchSize ?? DEFAULT_BATCH_SIZE;
    return { first: fixed, most: fixed, next: () => fixed };
  }
  const most = batchSize ?? MAX_BATCH_SIZE;
  const fewest = Math.min(MIN_TIMED_BATCH_SIZE, most);
  return {
    first: batchSize ?? DEFAULT_BATCH_SIZE,
    most,
    next: (limit, millis) => {
      // A clock too coarse to see the batch at all reads as "very fast": grow by the most allowed.
      const fitting = millis > 0 ? Math.floor((limit * budget) / millis) : Number.POSITIVE_INFINITY;
      return Math.max(fewest, Math.min(most, limit * MAX_GROWTH, fitting));
    },
  };
}

/**
 * Deletes every `done` row with `expires <= now`, batch after batch, each batch one short
 * immediate transaction (so a writer waits for at most one batch), until a batch deletes fewer
 * rows than its limit. On a store with a database-wide write lock (a SQLite file: its
 * `sweepBatchMillis`), or with `batchMillis` given, each batch's limit comes from the time the
 * previous batch took, so a batch holds the lock for about that long whatever one row costs on this
 * table and machine; a fixed `batchSize` alone fixes the rows. Batches walk the
 * `(status, expires, id)` index in its own order, so the whole sweep costs time linear in the
 * backlog and holds no ids in memory. `pending` rows are never touched, whatever their `expires`.
 *
 * It stops early on `maxBatches`, `maxSeconds` or an aborted `signal`, always between batches,
 * and yields to the event loop between batches so timers and signal handlers can run.
 *
 * ```
 *  stats(now) ─▶ batch ─▶ batch ─▶ … ─▶ batch (< its limit: drained) ─▶ stats(now)
 *                      ▲ between batches: signal? maxBatches? maxSeconds? ─▶ stop early
 *                      ▲ between batches: next limit = rows × batchMillis ÷ ms the batch took
 * ```
 *
 * @param store - any idempotency store (SQLite or Postgres); every call is awaited
 * @param options - see {@link SweepOptions}
 * @example
 * ```ts
 * import { sweep } from 'drizzle-idempotency';
 * import { openSqliteStore } from 'drizzle-idempotency/sqlite';
 *
 * const store = openSqliteStore('./idempotency.db');
 * const result = await sweep(store, { now: Date.now() / 1000, maxSeconds: 60 });
 * console.log(result); // { deleted: 12000, batches: 130, seconds: 0.41, remaining: 0, … }
 * store.close();
 * ```
 * @throws {@link InvalidTimeError} or {@link InvalidOptionError} before anything is read, for bad
 * options; errors of the store or of `onBatch` as they happen (batches already committed stay
 * deleted)
 */
export async function sweep(store: SweepableStore, options: SweepOptions): Promise<SweepResult> {
  validateSweepOptions(options);
  const { now, maxBatches, maxSeconds, signal, onBatch } = options;
  const clock = options.clock ?? (() => performance.now());
  const sizing = batchSizing(store, options);
  const started = clock();
  const elapsed = () => (clock() - started) / 1000;

  const backlog = (await store.stats(now)).expired;
  if (options.dryRun === true) {
    const cap = maxBatches === undefined ? backlog : Math.min(backlog, maxBatches * sizing.most);
    return {
      deleted: 0,
      batches: 0,
      seconds: elapsed(),
      remaining: backlog,
      backlog,
      stoppedBy: 'dryRun',
      wouldDelete: cap,
    };
  }

  let deleted = 0;
  let batches = 0;
  let batchSize = sizing.first;
  let stoppedBy: SweepStop;
  for (;;) {
    if (signal?.aborted) {
      stoppedBy = 'signal';
      break;
    }
    const batchStarted = clock();
    const batchDeleted = await store.sweepBatch(now, batchSize);
    const batchMillis = clock() - batchStarted;
    if (batchDeleted > 0) {
      deleted += batchDeleted;
      batches += 1;
      await onBatch?.({
        batchDeleted,
        deleted,
        batches,
        backlog,
        seconds: elapsed(),
        batchSize,
        batchMillis,
      });
    }
    if (batchDeleted < batchSize) {
      stoppedBy = 'drained';
      break;
    }
    if (maxBatches !== undefined && batches >= maxBatches) {
      stoppedBy = 'maxBatches';
      break;
    }
    if (maxSeconds !== undefined && elapsed() >= maxSeconds) {
      stoppedBy = 'maxSeconds';
      break;
    }
    batchSize = sizing.next(batchSize, batchMillis);
    // A synchronous store never yields by itself: without this, a SIGINT handler or an abort
    // timer could not run until the whole backlog was gone.
    await nextTurn();
  }

  const remaining = (await store.stats(now)).expired;
  return { deleted, batches, seconds: elapsed(), remaining, backlog, stoppedBy, wouldDelete: 0 };
}
