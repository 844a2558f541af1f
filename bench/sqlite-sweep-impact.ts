import { copyFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { startChild } from './support/child.js';
import {
  check,
  epochMs,
  median,
  medianWithInterval,
  pairedRatio,
  percentile,
  ratioOfMedians,
} from './support/measure.js';
import type { BenchSize, GroupResult } from './support/report.js';
import { shippedCore, shippedSqlite } from './support/shipped.js';
import {
  benchDir,
  DONE_INDEX,
  freshStoreFile,
  LARGE_SWEEP_BATCH,
  SEEDED_NOW,
  SWEEP_BATCH,
  seedKeys,
} from './support/sqlite-files.js';

const { DEFAULT_BATCH_MILLIS, sweep } = shippedCore;
const { openSqliteStore } = shippedSqlite;

const WRITER_INTERVAL_MS = 1;
const SETTLE_MS = 300;
// A window in which nothing else writes: the writer's own p99, the floor of the others.
const IDLE_MS = 2000;
const REBUILD_SETTLE_MS = 3000;

/** A stretch of time on the epoch clock, comparable with the writer's samples. */
export interface Window {
  readonly start: number;
  readonly end: number;
}

/** The writer's samples: it prints `ready` first and its samples last. */
export function lastLine(output: string): string {
  return output.trimEnd().split('\n').at(-1) ?? '';
}

/** The p99 latency of the writer's reserves scheduled within `window`. */
export function p99Within(
  samples: { scheduled: number[]; latencies: number[] },
  window: Window,
): number {
  const inside = samples.latencies.filter((_, i) => {
    const at = samples.scheduled[i] as number;
    return at >= window.start && at <= window.end;
  });
  return percentile(inside, 99);
}

/** Runs `run` with a settling pause either side, and returns the window it ran in. */
export async function during(run: () => unknown): Promise<Window> {
  await sleep(SETTLE_MS);
  const start = epochMs();
  await run();
  const end = epochMs();
  await sleep(SETTLE_MS);
  return { start, end };
}

type Side = 'sweep' | 'sweepFixed' | 'sweepLarge' | 'sweepNoDoneIndex' | 'delete' | 'idle';

/**
 * While a second process reserves a key every millisecond, removes the same expired backlog once
 * by `sweep()` as shipped (batches sized by its time budget), once by `sweep()` in fixed batches
 * of SWEEP_BATCH, once in fixed batches of LARGE_SWEEP_BATCH, once by `sweep()` as shipped with
 * the partial index of done rows dropped, and once by one `DELETE`, and
 * compares the p99 latency of the writer's reserves in each window with its p99 in a window of
 * the same round in which nothing else runs. Then sweeps a 100k and a 1M backlog in child
 * processes and reports what each sweep added to its process's RSS.
 */
export async function sqliteSweepImpact({ quick }: BenchSize): Promise<GroupResult> {
  const total = quick ? 300_000 : 1_000_000;
  const backlog = quick ? 50_000 : 100_000;
  const rounds = quick ? 3 : 5;
  const { dir, cleanup } = benchDir();
  try {
    const path = freshStoreFile(dir);
    seedKeys(path, total - backlog, 'live');
    const store = openSqliteStore(path);
    // Every batch's limit and duration as the sweep measured it, for the shipped sweep's windows.
    const timedBatches: { rows: number; millis: number }[] = [];
    const sweepTimed = () =>
      sweep(store, {
        now: SEEDED_NOW,
        onBatch: ({ batchSize, batchMillis }) => {
          timedBatches.push({ rows: batchSize, millis: batchMillis });
        },
      });
    const sweepAll = (batchSize: number) => () => sweep(store, { now: SEEDED_NOW, batchSize });
    const singleDelete = () =>
      store.db.$client
        .prepare("DELETE FROM keys WHERE status = 'done' AND expires <= ?")
        .run(SEEDED_NOW);
    // The partial index of done rows by id (migration 0002, for purge's id walk) is one more
    // b-tree each swept row is deleted from, at a random place. The same sweep without it, in the
    // same rounds, measures what that index costs the writer; it is put back after the window.
    const doneIndexSql = store.db.$client
      .prepare("SELECT sql FROM sqlite_master WHERE type = 'index' AND name = ?")
      .pluck()
      .get(DONE_INDEX) as string;
    const remove: Record<Side, () => unknown> = {
      sweep: sweepTimed,
      sweepFixed: sweepAll(SWEEP_BATCH),
      sweepLarge: sweepAll(LARGE_SWEEP_BATCH),
      sweepNoDoneIndex: () => sweep(store, { now: SEEDED_NOW }),
      delete: singleDelete,
      idle: () => sleep(IDLE_MS),
    };
    const sides = Object.keys(remove) as Side[];
    const samplesOf = (): Record<Side, number[]> => ({
      sweep: [],
      sweepFixed: [],
      sweepLarge: [],
      sweepNoDoneIndex: [],
      delete: [],
      idle: [],
    });
    const p99 = samplesOf();
    const durations = samplesOf();
    for (let round = 0; round < rounds; round++) {
      const stopFile = join(dir, `stop-${round}`);
      const writer = startChild('writer.ts', [path, String(WRITER_INTERVAL_MS), stopFile]);
      await writer.firstLine;
      const windows: Partial<Record<Side, Window>> = {};
      // Each round starts with another side, so none always runs on the warmest cache.
      const order = sides.map((_, step) => sides[(round + step) % sides.length] as Side);
      for (const side of order) {
        // Seeding holds the write lock too; it happens outside every window.
        if (side === 'sweepNoDoneIndex') store.db.$client.exec(`DROP INDEX ${DONE_INDEX}`);
        if (side !== 'idle') seedKeys(path, backlog, 'expired');
        windows[side] = await during(remove[side]);
        if (side === 'sweepNoDoneIndex') {
          store.db.$client.exec(doneIndexSql);
          // Building the index held the writer up for a while: let it catch up before the next
          // window opens.
          await sleep(REBUILD_SETTLE_MS);
        }
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

    const rss = await sweepRss(dir, quick);
    return {
      metrics: {
        'sqlite.sweep.writerP99.vsIdle': pairedRatio({ ours: p99.sweep, theirs: p99.idle }),
        'sqlite.sweep.writerP99.fixedBatchVsIdle': pairedRatio({
          ours: p99.sweepFixed,
          theirs: p99.idle,
        }),
        'sqlite.sweep.writerP99.largeBatchVsIdle': pairedRatio({
          ours: p99.sweepLarge,
          theirs: p99.idle,
        }),
        'sqlite.sweep.writerP99.withoutDoneIndexVsIdle': pairedRatio({
          ours: p99.sweepNoDoneIndex,
          theirs: p99.idle,
        }),
        'sqlite.sweep.writerP99.singleDeleteVsIdle': pairedRatio({
          ours: p99.delete,
          theirs: p99.idle,
        }),
        'sqlite.sweep.rss.mb100k': medianWithInterval(rss.small),
        'sqlite.sweep.rss.mb1M': medianWithInterval(rss.large),
        'sqlite.sweep.rss.scale': ratioOfMedians(rss.large, rss.small),
      },
      details: {
        'sqlite.sweep.writerP99.ms.sweep': median(p99.sweep),
        'sqlite.sweep.writerP99.ms.sweepFixedBatches': median(p99.sweepFixed),
        'sqlite.sweep.writerP99.ms.sweepLargeBatches': median(p99.sweepLarge),
        'sqlite.sweep.writerP99.ms.sweepWithoutDoneIndex': median(p99.sweepNoDoneIndex),
        'sqlite.sweep.writerP99.ms.singleDelete': median(p99.delete),
        'sqlite.sweep.writerP99.ms.idle': median(p99.idle),
        'sqlite.sweep.window.ms.sweep': median(durations.sweep),
        'sqlite.sweep.window.ms.sweepFixedBatches': median(durations.sweepFixed),
        'sqlite.sweep.window.ms.sweepLargeBatches': median(durations.sweepLarge),
        'sqlite.sweep.window.ms.sweepWithoutDoneIndex': median(durations.sweepNoDoneIndex),
        'sqlite.sweep.window.ms.singleDelete': median(durations.delete),
        'sqlite.sweep.writerP99.backlog': backlog,
        'sqlite.sweep.writerP99.rounds': rounds,
        'sqlite.sweep.batch': SWEEP_BATCH,
        'sqlite.sweep.timed.rows.median': median(timedBatches.map((batch) => batch.rows)),
        'sqlite.sweep.timed.ms.median': median(timedBatches.map((batch) => batch.millis)),
        'sqlite.sweep.timed.ms.p99': percentile(
          timedBatches.map((batch) => batch.millis),
          99,
        ),
        'sqlite.sweep.timed.budgetMs': DEFAULT_BATCH_MILLIS,
        'sqlite.sweep.largeBatch': LARGE_SWEEP_BATCH,
        'sqlite.sweep.rss.baselineMb': median(rss.baselines),
        'sqlite.sweep.rss.heapGrowthMb.small': median(rss.heapSmall),
        'sqlite.sweep.rss.heapGrowthMb.large': median(rss.heapLarge),
        'sqlite.sweep.rss.backlog.small': rss.backlogs[0],
        'sqlite.sweep.rss.backlog.large': rss.backlogs[1],
      },
    };
  } finally {
    cleanup();
  }
}

/**
 * Sweeps a small and a large backlog (100k and 1M rows in a full run) in child processes, each
 * round on a fresh copy of a file seeded once, alternating, and returns each sweep's peak RSS
 * minus the RSS the child had with the store open before sweeping.
 */
async function sweepRss(dir: string, quick: boolean) {
  const backlogs = quick ? ([20_000, 200_000] as const) : ([100_000, 1_000_000] as const);
  const rounds = 3;
  const seeded = backlogs.map((rows) => {
    const path = freshStoreFile(dir);
    seedKeys(path, rows, 'expired');
    return path;
  });
  const small: number[] = [];
  const large: number[] = [];
  const baselines: number[] = [];
  const heapSmall: number[] = [];
  const heapLarge: number[] = [];
  for (let round = 0; round < rounds; round++) {
    const order = round % 2 === 0 ? [0, 1] : [1, 0];
    for (const index of order) {
      const copy = `${seeded[index]}-round-${round}`;
      copyFileSync(seeded[index] as string, copy);
      const result = JSON.parse(
        await startChild('sweep-rss.ts', [copy, String(SEEDED_NOW), String(SWEEP_BATCH)]).output,
      ) as {
        deleted: number;
        baselineMb: number;
        peakMb: number;
        heapBeforeMb: number;
        heapAfterMb: number;
      };
      check(result.deleted === backlogs[index], 'sweep in the RSS child');
      rmSync(copy, { force: true });
      (index === 0 ? small : large).push(result.peakMb - result.baselineMb);
      baselines.push(result.baselineMb);
      (index === 0 ? heapSmall : heapLarge).push(result.heapAfterMb - result.heapBeforeMb);
    }
  }
  return { small, large, baselines, backlogs, heapSmall, heapLarge };
}
