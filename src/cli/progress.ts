import cliProgress from 'cli-progress';
import type { SweepProgress } from '../sweep.js';
import type { CliOutput } from './io.js';

/** A progress bar of a sweep: deleted / backlog, rate and ETA. */
export interface SweepBar {
  /** Draws the state after a batch. */
  update(progress: SweepProgress): void;
  /** Leaves the bar's last state on screen and releases the terminal. */
  stop(): void;
}

/**
 * A bar drawn on `output`, started at the first batch so an empty backlog draws nothing.
 *
 * @param output - a TTY stream (the CLI uses stderr, keeping stdout for the summary)
 */
export function sweepBar(output: CliOutput): SweepBar {
  const bar = new cliProgress.SingleBar(
    {
      stream: output,
      format: 'sweeping [{bar}] {value}/{total} rows | {rate} rows/s | ETA {eta_formatted}',
      hideCursor: true,
    },
    cliProgress.Presets.shades_classic,
  );
  let started = false;
  return {
    update(progress) {
      const rate = progress.seconds > 0 ? Math.round(progress.deleted / progress.seconds) : 0;
      // Rows that expire or finish during the sweep can push the count past the first backlog.
      const total = Math.max(progress.backlog, progress.deleted);
      if (!started) {
        bar.start(total, progress.deleted, { rate });
        started = true;
        return;
      }
      bar.setTotal(total);
      bar.update(progress.deleted, { rate });
    },
    stop() {
      if (!started) return;
      started = false;
      bar.stop();
    },
  };
}
