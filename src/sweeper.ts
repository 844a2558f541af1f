/**
 * The built-in sweeper: the batched retention sweep on a schedule, run by at most one process at
 * a time among all those sharing a database.
 *
 * @module
 */
import { InvalidOptionError, StoreClosedError } from './core/errors.js';
import type { LeasedIdempotencyStore } from './core/store.js';
import { MAX_LEASE_SECONDS } from './core/validation.js';
import {
  type SweepableStore,
  type SweepProgress,
  type SweepResult,
  sweep,
  validateSweepOptions,
} from './sweep.js';

/**
 * The id of the row that holds the sweeper's lease, in the keys table itself, so the lease works
 * on every dialect and through a transaction pooler (no session lock, no extra table). It starts
 * with U+001F, which no HTTP key (printable ASCII) nor scoped id (a JSON string first) can.
 */
export const SWEEPER_LEASE_KEY = '\u001fdrizzle-idempotency\u001fsweeper';

/** The fingerprint of the sweeper's lease row. */
export const SWEEPER_LEASE_FINGERPRINT = 'sweeper';

/** Seconds between two sweeps when `intervalSeconds` is not given: five minutes. */
export const DEFAULT_SWEEP_INTERVAL_SECONDS = 300;

/** The sweeper's lease when `leaseSeconds` is not given: renewed after every batch. */
export const DEFAULT_SWEEPER_LEASE_SECONDS = 60;

/**
 * How far each wait strays from `intervalSeconds`, as a fraction of it: processes started
 * together drift apart instead of contending for the lease at the same instant forever.
 */
export const SWEEP_JITTER = 0.2;

/** Options of {@link startSweeper}. */
export interface SweeperOptions {
  /**
   * Seconds between two sweeps (a finite number above 0), each wait drawn at random within
   * ±{@link SWEEP_JITTER} of it; the first sweep comes after a random part of one interval.
   * Default {@link DEFAULT_SWEEP_INTERVAL_SECONDS}.
   */
  readonly intervalSeconds?: number;
  /**
   * The clock the application uses for `expires` and leases, in its unit (seconds by default).
   * Called once per sweep and at every lease renewal. Default `Date.now() / 1000`.
   */
  readonly now?: () => number;
  /**
   * The sweeper's lease in the clock's unit (above 0, at most {@link MAX_LEASE_SECONDS}): renewed
   * after each batch, so a batch together with `onBatch` must take less. A sweeper that dies
   * mid-sweep holds the others off for at most this long. Default
   * {@link DEFAULT_SWEEPER_LEASE_SECONDS}.
   */
  readonly leaseSeconds?: number;
  /** Rows per batch, as {@link SweepOptions.batchSize}. */
  readonly batchSize?: number;
  /** The time budget of a batch, as {@link SweepOptions.batchMillis}. */
  readonly batchMillis?: number;
  /** Called (and awaited) after each batch of this process's sweeps. */
  readonly onBatch?: (progress: SweepProgress) => void | Promise<void>;
  /** Called after each sweep this process ran (not when another process held the lease). */
  readonly onSweep?: (result: SweepResult) => void | Promise<void>;
  /**
   * Called with what made a sweep fail (a lost connection, a throwing `onBatch`); the sweeper
   * carries on at the next interval. Default: a process warning (`process.emitWarning`).
   */
  readonly onError?: (error: unknown) => void;
  /** Aborting it stops the sweeper as {@link Sweeper.stop} does. */
  readonly signal?: AbortSignal;
}

/** A running sweeper, see {@link startSweeper}. */
export interface Sweeper {
  /**
   * Stops the sweeper: no new sweep starts, a sweep in flight stops after its current batch and
   * gives its lease back. Resolves once that batch has committed. Calling it again is harmless.
   */
  stop(): Promise<void>;
  /** Whether the sweeper has stopped (by `stop()`, the signal, or the store's `close()`). */
  readonly stopped: boolean;
}

/** What a sweeper needs of a store: the sweep's calls and the fenced lease. */
export type SweeperStore = SweepableStore &
  Pick<LeasedIdempotencyStore, 'acquire' | 'renew' | 'release'>;

function positive(value: unknown, name: string, most: number): void {
  if (typeof value !== 'number' || !Number.isFinite(value) || value <= 0 || value > most) {
    throw new InvalidOptionError(
      `${name} must be a finite number greater than 0 and at most ${most}, got ${String(value)}`,
    );
  }
}

function validate(options: SweeperOptions): void {
  if (typeof options !== 'object' || options === null) {
    throw new InvalidOptionError('startSweeper options must be an object');
  }
  if (options.intervalSeconds !== undefined) {
    // A Node timer cannot wait longer than 2^31 - 1 ms.
    positive(options.intervalSeconds, 'intervalSeconds', 2_000_000);
  }
  if (options.leaseSeconds !== undefined) {
    positive(options.leaseSeconds, 'leaseSeconds', MAX_LEASE_SECONDS);
  }
  for (const name of ['now', 'onSweep', 'onError'] as const) {
    if (options[name] !== undefined && typeof options[name] !== 'function') {
      throw new InvalidOptionError(`${name} must be a function`);
    }
  }
  validateSweepOptions({
    now: 0,
    batchSize: options.batchSize,
    batchMillis: options.batchMillis,
    onBatch: options.onBatch,
    signal: options.signal,
  });
}

function warn(error: unknown): void {
  process.emitWarning(
    `drizzle-idempotency sweeper: ${error instanceof Error ? error.message : String(error)}`,
  );
}

/**
 * Runs the batched {@link sweep} every `intervalSeconds` (jittered) until stopped, so expired
 * answers leave the table without a cron job. Any number of processes may start one on the same
 * database: each sweep first takes a lease on a reserved row of the keys table
 * ({@link SWEEPER_LEASE_KEY}) with the store's fenced `acquire`, renews it after every batch and
 * releases it at the end; a process that finds the lease held skips that sweep silently. The
 * lease is one row and plain statements, so it works on every dialect and through PgBouncer in
 * transaction mode. A sweeper whose renewal fails (its lease lapsed and another took it) stops
 * that sweep at once.
 *
 * The sweeper stops on `stop()`, on its `signal`, and when the store is closed (the next call
 * finds it closed). Its timer does not keep the process alive.
 *
 * ```
 *  wait ─▶ acquire lease ─▶ held elsewhere? ─▶ wait
 *                └▶ batch ─▶ renew ─▶ batch ─▶ … ─▶ drained ─▶ release lease ─▶ wait
 * ```
 *
 * @param store - a store of any dialect
 * @param options - see {@link SweeperOptions}
 * @example
 * ```ts
 * const sweeper = startSweeper(store, { intervalSeconds: 300 });
 * process.once('SIGTERM', async () => {
 *   await sweeper.stop();
 *   await store.close();
 * });
 * ```
 * @throws {@link InvalidOptionError} for options out of range or of the wrong type
 */
export function startSweeper(store: SweeperStore, options: SweeperOptions = {}): Sweeper {
  validate(options);
  const interval = options.intervalSeconds ?? DEFAULT_SWEEP_INTERVAL_SECONDS;
  const leaseSeconds = options.leaseSeconds ?? DEFAULT_SWEEPER_LEASE_SECONDS;
  const clock = options.now ?? (() => Date.now() / 1000);
  const onError = options.onError ?? warn;
  const stopping = new AbortController();
  let stopped = false;
  let timer: NodeJS.Timeout | undefined;
  let wake: (() => void) | undefined;

  const stop = () => {
    stopped = true;
    stopping.abort();
    if (timer !== undefined) clearTimeout(timer);
    wake?.();
  };
  options.signal?.addEventListener('abort', stop, { once: true });
  if (options.signal?.aborted) stop();

  const pause = (seconds: number) =>
    new Promise<void>((resolve) => {
      wake = resolve;
      timer = setTimeout(resolve, seconds * 1000);
      timer.unref();
    });

  const sweepOnce = async (): Promise<void> => {
    const now = clock();
    const lease = await store.acquire(SWEEPER_LEASE_KEY, SWEEPER_LEASE_FINGERPRINT, {
      now,
      expires: now + leaseSeconds,
      leaseSeconds,
    });
    if (lease.status !== 'acquired') return;
    const { fencingToken } = lease;
    // Aborted when this sweep lost its lease or the sweeper stops: the sweep ends after the
    // batch in flight.
    const run = new AbortController();
    const onStop = () => run.abort();
    stopping.signal.addEventListener('abort', onStop, { once: true });
    try {
      const result = await sweep(store, {
        now,
        batchSize: options.batchSize,
        batchMillis: options.batchMillis,
        signal: run.signal,
        onBatch: async (progress) => {
          await options.onBatch?.(progress);
          const at = clock();
          const renewed = await store.renew(
            SWEEPER_LEASE_KEY,
            SWEEPER_LEASE_FINGERPRINT,
            fencingToken,
            at + leaseSeconds,
          );
          if (!renewed) run.abort();
        },
      });
      await options.onSweep?.(result);
    } finally {
      stopping.signal.removeEventListener('abort', onStop);
      // Fenced: a sweeper that lost its lease deletes nothing of the one that took it over.
      await store.release(SWEEPER_LEASE_KEY, SWEEPER_LEASE_FINGERPRINT, fencingToken);
    }
  };

  const loop = async (): Promise<void> => {
    let wait = Math.random() * interval;
    while (!stopped) {
      await pause(wait);
      if (stopped) break;
      try {
        await sweepOnce();
      } catch (error) {
        if (error instanceof StoreClosedError) break;
        onError(error);
      }
      wait = interval * (1 - SWEEP_JITTER + 2 * SWEEP_JITTER * Math.random());
    }
    stopped = true;
    options.signal?.removeEventListener('abort', stop);
  };
  const done = loop();

  return {
    stop: async () => {
      stop();
      await done;
    },
    get stopped() {
      return stopped;
    },
  };
}
