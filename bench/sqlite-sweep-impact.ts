import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { sweep } from '../src/index.js';
import { openSqliteStore } from '../src/sqlite/index.js';
import { startChild } from './support/child.js';
import { epochMs, median, percentile } from './support/measure.js';
import type { BenchSize, GroupResult } from './support/report.js';
import {
  benchDir,
  freshStoreFile,
  LARGE_SWEEP_BATCH,
  SEEDED_NOW,
  SWEEP_BATCH,
  seedKeys,
} from './support/sqlite-files.js';

const WRITER_INTERVAL_MS = 1;
const SETTLE_MS = 300;
// A window in which nothing else writes: the writer's own p99, the floor of the others.
const IDLE_MS = 2000;

interface Window {
  readonly start: number;
  readonly end: number;
}

// The writer prints `ready` first and its samples last.
function lastLine(output: string): string {
  return output.trimEnd().split('\n').at(-1) ?? '';
}

function p99Within(samples: { scheduled: number[]; latencies: number[] }, window: Window): number {
  const inside = samples.latencies.filter((_, i) => {
    const at = samples.scheduled[i] as number;
    return at >= window.start && at <= window.end;
  });
  return percentile(inside, 99);
}

async function during(run: () => unknown): Promise<Window> {
  await sleep(SETTLE_MS);
  const start = epochMs();
  await run();
  const end = epochMs();
  await sleep(SETTLE_MS);
  return { start, end };
}

type Side = 'sweep' | 'sweepLarge' | 'delete' | 'idle';

/**
 * While a second process reserves a key every millisecond, removes the same expired backlog once
 * by `sweep()` (batches of SWEEP_BATCH), once by `sweep()` in batches of LARGE_SWEEP_BATCH and once
 * by one `DELETE`, and compares the p99 latency of the writer's reserves in each window, beside a
 * window in which nothing else runs. Then sweeps a large backlog in a child process and reports
 * that process's peak RSS.
 */
export async function sqliteSweepImpact({ quick }: BenchSize): Promise<GroupResult> {
  const total = quick ? 300_000 : 1_000_000;
  const backlog = quick ? 100_000 : 200_000;
  const rounds = quick ? 2 : 3;
  const { dir, cleanup } = benchDir();
  try {
    const path = freshStoreFile(dir);
    seedKeys(path, 'base', total - backlog, 'live');
    const store = openSqliteStore(path);
    const sweepAll = (batchSize: number) => () => sweep(store, { now: SEEDED_NOW, batchSize });
    const singleDelete = () =>
      store.db.$client
        .prepare("DELETE FROM keys WHERE status = 'done' AND expires <= ?")
        .run(SEEDED_NOW);
    const remove: Record<Side, () => unknown> = {
      sweep: sweepAll(SWEEP_BATCH),
      sweepLarge: sweepAll(LARGE_SWEEP_BATCH),
      delete: singleDelete,
      idle: () => sleep(IDLE_MS),
    };
    const sides = Object.keys(remove) as Side[];
    const p99: Record<Side, number[]> = { sweep: [], sweepLarge: [], delete: [], idle: [] };
    const durations: Record<Side, number[]> = { sweep: [], sweepLarge: [], delete: [], idle: [] };
    for (let round = 0; round < rounds; round++) {
      const stopFile = join(dir, `stop-${round}`);
      const writer = startChild('writer.ts', [path, String(WRITER_INTERVAL_MS), stopFile]);
      await writer.firstLine;
      const windows: Partial<Record<Side, Window>> = {};
      // Each round starts with another side, so none always runs on the warmest cache.
      const order = sides.map((_, step) => sides[(round + step) % sides.length] as Side);
      for (const [index, side] of order.entries()) {
        // Seeding holds the write lock too; it happens outside every window.
        if (side !== 'idle') seedKeys(path, `x${round}-${index}-`, backlog, 'expired');
        windows[side] = await during(remove[side]);
      }
      writeFileSync(stopFile, '');
      const samples = JSON.parse(lastLine(await writer.output)) as {
        scheduled: number[];
        latencies: number[];
      };
      for (const side of order) {
        const window = windows[side] as Window;
        p99[side].push(p99Within(samples, window));
        durations[side].push(window.end - window.start);
      }
    }
    store.close();

    const rssPath = freshStoreFile(dir);
    const rssBacklog = quick ? 200_000 : 1_000_000;
    seedKeys(rssPath, 'x', rssBacklog, 'expired');
    const rss = JSON.parse(
      await startChild('sweep-rss.ts', [rssPath, String(SEEDED_NOW), String(SWEEP_BATCH)]).output,
    ) as { deleted: number; baselineMb: number; peakMb: number };
    if (rss.deleted !== rssBacklog) throw new Error(`swept ${rss.deleted} of ${rssBacklog} rows`);

    return {
      metrics: {
        'sqlite.sweep.writerP99.vsSingleDelete': median(p99.sweep) / median(p99.delete),
        'sqlite.sweep.peakRssMb': rss.peakMb,
      },
      details: {
        'sqlite.sweep.writerP99.ms.sweep': median(p99.sweep),
        'sqlite.sweep.writerP99.ms.sweepLargeBatches': median(p99.sweepLarge),
        'sqlite.sweep.writerP99.ms.singleDelete': median(p99.delete),
        'sqlite.sweep.writerP99.ms.idle': median(p99.idle),
        'sqlite.sweep.window.ms.sweep': median(durations.sweep),
        'sqlite.sweep.window.ms.sweepLargeBatches': median(durations.sweepLarge),
        'sqlite.sweep.window.ms.singleDelete': median(durations.delete),
        'sqlite.sweep.writerP99.backlog': backlog,
        'sqlite.sweep.batch': SWEEP_BATCH,
        'sqlite.sweep.largeBatch': LARGE_SWEEP_BATCH,
        'sqlite.sweep.rss.baselineMb': rss.baselineMb,
        'sqlite.sweep.rss.backlog': rssBacklog,
      },
    };
  } finally {
    cleanup();
  }
}
