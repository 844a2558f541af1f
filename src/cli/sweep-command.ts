import { type SweepOptions, type SweepResult, sweep, validateSweepOptions } from '../sweep.js';
import { startSweeper } from '../sweeper.js';
import type { LocatedOptions, TimedOptions } from './commands.js';
import { type CliIo, writeJson } from './io.js';
import { withStore } from './open-store.js';
import { sweepBar } from './progress.js';

/** The flags of `idem sweep`. */
export interface SweepCommandOptions extends TimedOptions {
  readonly batch?: number;
  readonly batchMillis?: number;
  readonly maxBatches?: number;
  readonly maxSeconds?: number;
  readonly dryRun?: boolean;
}

/** Exit codes of a process ended by a signal, by the shell's convention 128 + signal number. */
const SIGNAL_EXIT_CODES = { SIGINT: 130, SIGTERM: 143 } as const;

function summary(result: SweepResult): Record<string, unknown> {
  const { deleted, batches, remaining, backlog, stoppedBy, wouldDelete } = result;
  const seconds = Math.round(result.seconds * 1000) / 1000;
  return stoppedBy === 'dryRun'
    ? { deleted, batches, seconds, remaining, backlog, stoppedBy, dryRun: true, wouldDelete }
    : { deleted, batches, seconds, remaining, backlog, stoppedBy };
}

function humanSummary(result: SweepResult): string {
  if (result.stoppedBy === 'dryRun') {
    return `dry run: ${result.backlog} expired rows, a sweep would delete ${result.wouldDelete}\n`;
  }
  return (
    `deleted ${result.deleted} expired rows in ${result.batches} batches ` +
    `(${result.seconds.toFixed(2)} s, stopped by ${result.stoppedBy}); ${result.remaining} remain\n`
  );
}

/**
 * `idem sweep`: the library's {@link sweep} with a progress bar on a TTY, a JSON summary line
 * otherwise. SIGINT and SIGTERM stop it after the current batch; the summary is still printed.
 *
 * @returns 0, or 130 / 143 when a signal stopped it
 */
export async function sweepCommand(io: CliIo, options: SweepCommandOptions): Promise<number> {
  const controller = new AbortController();
  let exitCode = 0;
  const handlers = Object.entries(SIGNAL_EXIT_CODES).map(([signal, code]) => {
    const handler = () => {
      exitCode = code;
      controller.abort();
    };
    io.signals.on(signal, handler);
    return () => io.signals.off(signal, handler);
  });
  const bar = !options.json && io.stdout.isTTY === true ? sweepBar(io.stderr) : undefined;
  const sweepOptions: SweepOptions = {
    now: options.now,
    batchSize: options.batch,
    batchMillis: options.batchMillis,
    maxBatches: options.maxBatches,
    maxSeconds: options.maxSeconds,
    dryRun: options.dryRun ?? false,
    signal: controller.signal,
    onBatch: bar && ((progress) => bar.update(progress)),
  };
  try {
    validateSweepOptions(sweepOptions);
    const result = await withStore(options.location, options.dryRun ? 'read' : 'write', (store) =>
      sweep(store, sweepOptions),
    );
    bar?.stop();
    if (bar) io.stdout.write(humanSummary(result));
    else writeJson(io.stdout, summary(result));
    return exitCode;
  } finally {
    bar?.stop();
    for (const remove of handlers) remove();
  }
}

/** The flags of `idem sweep --every`. */
export interface SweepEveryOptions extends LocatedOptions {
  /** Seconds between sweeps. */
  readonly every: number;
  readonly batch?: number;
  readonly batchMillis?: number;
  readonly json?: boolean;
}

/**
 * `idem sweep --every 5m`: a sidecar that runs {@link startSweeper} on the store until SIGINT or
 * SIGTERM, which stop it after the batch in flight. It prints a summary of each sweep it ran
 * (one JSON line each with `--json`), and writes a failed sweep to stderr and carries on, as a
 * sidecar must survive a database restart. Any number may run against one store: one sweeps at a
 * time, the others skip.
 *
 * @returns 0 once stopped by a signal
 */
export async function sweepEveryCommand(io: CliIo, options: SweepEveryOptions): Promise<number> {
  validateSweepOptions({ now: 0, batchSize: options.batch, batchMillis: options.batchMillis });
  return withStore(options.location, 'write', async (store) => {
    const stopped = new Promise<void>((resolve) => {
      const handler = () => {
        for (const signal of Object.keys(SIGNAL_EXIT_CODES)) io.signals.off(signal, handler);
        resolve();
      };
      for (const signal of Object.keys(SIGNAL_EXIT_CODES)) io.signals.on(signal, handler);
    });
    const sweeper = startSweeper(store, {
      intervalSeconds: options.every,
      batchSize: options.batch,
      batchMillis: options.batchMillis,
      onSweep: (result) => {
        if (options.json) writeJson(io.stdout, summary(result));
        else io.stdout.write(humanSummary(result));
      },
      onError: (error) => {
        io.stderr.write(
          `idem: a sweep failed, trying again in ${options.every} s: ${error instanceof Error ? error.message : String(error)}\n`,
        );
      },
    });
    // The sweeper's timer lets a process end; this sidecar lives until it is told to stop.
    const alive = setInterval(() => undefined, 2 ** 31 - 1);
    try {
      await stopped;
      await sweeper.stop();
    } finally {
      clearInterval(alive);
    }
    return 0;
  });
}
