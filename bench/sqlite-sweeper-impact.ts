import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { during, lastLine, p99Within, type Window } from './sqlite-sweep-impact.js';
import { startChild } from './support/child.js';
import { check, median, pairedRatio } from './support/measure.js';
import type { BenchSize, GroupResult } from './support/report.js';
import { shippedCore, shippedSqlite } from './support/shipped.js';
import { benchDir, freshStoreFile, SEEDED_NOW, seedKeys } from './support/sqlite-files.js';

const { startSweeper } = shippedCore;
const { openSqliteStore } = shippedSqlite;

const WRITER_INTERVAL_MS = 1;
// The sweeper's interval: short, so its first sweep (after a random part of one interval) starts
// almost as soon as the window opens.
const SWEEPER_INTERVAL_SECONDS = 0.05;
const IDLE_MS = 2000;

type Side = 'sweeper' | 'idle';

/**
 * Writers' p99 while the built-in sweeper (`startSweeper`, in the process that serves requests,
 * with its shipped defaults: batches sized by their time budget, its lease renewed after each)
 * drains an expired backlog, against a window of the same round in which nothing else runs. A
 * second process reserves a key every millisecond throughout, as `sqlite-sweep-impact` measures
 * for the `sweep()` call; here the sweeper's lease row and renewals are in the window too.
 * Reported, no target.
 */
export async function sqliteSweeperImpact({ quick }: BenchSize): Promise<GroupResult> {
  const total = quick ? 300_000 : 1_000_000;
  const backlog = quick ? 50_000 : 100_000;
  const rounds = quick ? 3 : 7;
  const { dir, cleanup } = benchDir();
  try {
    const path = freshStoreFile(dir);
    seedKeys(path, total - backlog, 'live');
    const store = openSqliteStore(path);
    const batches: number[] = [];
    // Starts the sweeper, resolves once its first sweep has drained the backlog and it stopped.
    const runSweeper = async () => {
      let drained: (deleted: number, remaining: number, count: number) => void = () => undefined;
      let failed: (error: unknown) => void = () => undefined;
      const swept = new Promise<[number, number, number]>((resolve, reject) => {
        drained = (...result) => resolve(result);
        failed = reject;
      });
      const sweeper = startSweeper(store, {
        intervalSeconds: SWEEPER_INTERVAL_SECONDS,
        now: () => SEEDED_NOW,
        onSweep: (result) => drained(result.deleted, result.remaining, result.batches),
        onError: failed,
      });
      try {
        const [deleted, remaining, count] = await swept;
        check(deleted === backlog && remaining === 0, 'the sweeper drained the backlog');
        batches.push(count);
      } finally {
        await sweeper.stop();
      }
    };
    const p99: Record<Side, number[]> = { sweeper: [], idle: [] };
    const durations: number[] = [];
    for (let round = 0; round < rounds; round++) {
      const stopFile = join(dir, `stop-${round}`);
      const writer = startChild('writer.ts', [path, String(WRITER_INTERVAL_MS), stopFile]);
      await writer.firstLine;
      const windows: Partial<Record<Side, Window>> = {};
      const order: Side[] = round % 2 === 0 ? ['sweeper', 'idle'] : ['idle', 'sweeper'];
      for (const side of order) {
        // Seeding holds the write lock too; it happens outside every window.
        if (side === 'sweeper') seedKeys(path, backlog, 'expired');
        windows[side] = await during(side === 'sweeper' ? runSweeper : () => sleep(IDLE_MS));
      }
      writeFileSync(stopFile, '');
      const samples = JSON.parse(lastLine(await writer.output)) as {
        scheduled: number[];
        latencies: number[];
      };
      for (const side of order) p99[side].push(p99Within(samples, windows[side] as Window));
      const window = windows.sweeper as Window;
      durations.push(window.end - window.start);
    }
    store.close();
    return {
      metrics: {
        'sqlite.sweeper.writerP99.vsIdle': pairedRatio({ ours: p99.sweeper, theirs: p99.idle }),
      },
      details: {
        'sqlite.sweeper.writerP99.ms.sweeper': median(p99.sweeper),
        'sqlite.sweeper.writerP99.ms.idle': median(p99.idle),
        'sqlite.sweeper.window.ms': median(durations),
        'sqlite.sweeper.batches.median': median(batches),
        'sqlite.sweeper.backlog': backlog,
        'sqlite.sweeper.rounds': rounds,
      },
    };
  } finally {
    cleanup();
  }
}
