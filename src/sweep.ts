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

/**
 * The rows a batch deletes when no `batchSize` is given. Small on purpose: on SQLite a writer that
 * finds a batch holding the lock sleeps in the busy handler's steps (1, 2, 5, 10 … ms) before it
 * tries again, so a batch short enough to end within the first steps costs it a few milliseconds,
 * where one of 500 rows costs it 10–20.
 */
export const DEFAULT_BATCH_SIZE = 100;

/** What a sweep needs from a store: any dialect's store provides it. */
export type SweepableStore = Pick<IdempotencyStore, 'sweepBatch' | 'stats'>;

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
}

/** Options of {@link sweep}. */
export interface SweepOptions {
  /**
   * The time to sweep at, on the clock the application used for `expires`: every `done` row with
   * `expires <= now` is deleted. The same `now` is used for every batch.
   */
  readonly now: number;
  /** Rows per batch, each batch in its own short transaction: an integer 1–10,000. Default 100. */
  readonly batchSize?: number;
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
   * `maxSeconds` cannot be predicted and is ignored, so `wouldDelete` is an upper bound.
   */
  readonly dryRun?: boolean;
  /** Aborting it stops the sweep once the current batch has committed. */
  readonly signal?: AbortSignal;
  /** Called after each batch (and awaited). An error it throws ends the sweep. */
  readonly onBatch?: (progress: SweepProgress) => void | Promise<void>;
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
   * Why the sweep ended: `drained` when a batch found fewer rows than `batchSize` (the backlog was
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
}

/**
 * Deletes every `done` row with `expires <= now`, batch after batch, each batch one short
 * immediate transaction (so a writer waits for at most one batch), until a batch deletes fewer
 * than `batchSize` rows. Batches walk the `(status, expires, id)` index in its own order, so the
 * whole sweep costs time linear in the backlog and holds no ids in memory. `pending` rows are
 * never touched, whatever their `expires`.
 *
 * It stops early on `maxBatches`, `maxSeconds` or an aborted `signal`, always between batches,
 * and yields to the event loop between batches so timers and signal handlers can run.
 *
 * ```
 *  stats(now) ─▶ batch ─▶ batch ─▶ … ─▶ batch (< batchSize rows: drained) ─▶ stats(now)
 *                      ▲ between batches: signal? maxBatches? maxSeconds? ─▶ stop early
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
 * const result = await sweep(store, { now: Date.now() / 1000, batchSize: 500, maxSeconds: 60 });
 * console.log(result); // { deleted: 12000, batches: 24, seconds: 0.41, remaining: 0, … }
 * store.close();
 * ```
 * @throws {@link InvalidTimeError} or {@link InvalidOptionError} before anything is read, for bad
 * options; errors of the store or of `onBatch` as they happen (batches already committed stay
 * deleted)
 */
export async function sweep(store: SweepableStore, options: SweepOptions): Promise<SweepResult> {
  validateSweepOptions(options);
  const { now, maxBatches, maxSeconds, signal, onBatch } = options;
  const batchSize = options.batchSize ?? DEFAULT_BATCH_SIZE;
  const started = performance.now();
  const elapsed = () => (performance.now() - started) / 1000;

  const backlog = (await store.stats(now)).expired;
  if (options.dryRun === true) {
    const cap = maxBatches === undefined ? backlog : Math.min(backlog, maxBatches * batchSize);
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
  let stoppedBy: SweepStop;
  for (;;) {
    if (signal?.aborted) {
      stoppedBy = 'signal';
      break;
    }
    const batchDeleted = await store.sweepBatch(now, batchSize);
    if (batchDeleted > 0) {
      deleted += batchDeleted;
      batches += 1;
      await onBatch?.({ batchDeleted, deleted, batches, backlog, seconds: elapsed() });
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
    // A synchronous store never yields by itself: without this, a SIGINT handler or an abort
    // timer could not run until the whole backlog was gone.
    await nextTurn();
  }

  const remaining = (await store.stats(now)).expired;
  return { deleted, batches, seconds: elapsed(), remaining, backlog, stoppedBy, wouldDelete: 0 };
}
