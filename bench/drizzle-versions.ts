import {
  alternateCopies,
  CHECKOUT_DRIZZLE,
  installCopy,
  newestDrizzle1,
  nodeBinary,
  packCheckout,
  sideOf,
} from './support/installs.js';
import { median, pairedRatio } from './support/measure.js';
import type { BenchSize, GroupResult, Metric } from './support/report.js';
import { benchDir } from './support/sqlite-files.js';

// Each operation: its metric name, the child's measurement and the side that times it.
const OPERATIONS = [
  { op: 'acquireFinish', measurement: 'storeOps', side: 'acquireFinish' },
  { op: 'fetch', measurement: 'storeOps', side: 'fetch' },
  { op: 'layerCycle', measurement: 'cycle1', side: 'ours' },
  // better-sqlite3 alone, no drizzle: the control, about 1 when the copies differ only in drizzle.
  { op: 'bareCycle', measurement: 'cycle1', side: 'bare' },
] as const;

/**
 * The package's SQLite operations on drizzle-orm 1.0 (its newest release, or release candidate
 * while there is none) against the checkout's 0.45, both under Node 24: the packed package
 * installed twice outside the checkout with the same better-sqlite3, each round run in a fresh
 * child process per copy, alternating which goes first. Per operation: acquire then finish of a
 * new key, fetch of a finished one, the HTTP layer's full cycle, and the bare better-sqlite3 cycle
 * as a control. Ratio = drizzle 1.0 ÷ 0.45 calls per second, per round. Reported, no targets.
 */
export async function drizzleVersions({ quick }: BenchSize): Promise<GroupResult> {
  const tarball = packCheckout();
  const node = nodeBinary(24);
  const drizzle1 = newestDrizzle1();
  const copies = {
    v1: installCopy('drizzle-1', node, tarball, drizzle1),
    v045: installCopy('node-24', node, tarball, CHECKOUT_DRIZZLE),
  };
  const rounds = quick ? 3 : 11;
  const { dir, cleanup } = benchDir();
  try {
    const figures = await alternateCopies(
      copies,
      [
        { name: 'storeOps', count: 2000 },
        { name: 'cycle1', count: 400 },
      ],
      rounds,
      dir,
    );
    const metrics: Record<string, Metric> = {};
    const details: Record<string, number> = {
      'drizzle.rounds': rounds,
      // Which 1.0 was measured: its release candidate number, 0 once a release is out.
      'drizzle.v1.releaseCandidate': Number(/-rc\.(\d+)$/.exec(drizzle1)?.[1] ?? 0),
    };
    for (const { op, measurement, side } of OPERATIONS) {
      const v1 = sideOf(figures, 'v1', measurement, side);
      const v045 = sideOf(figures, 'v045', measurement, side);
      metrics[`drizzle.v1.vsV045.${op}`] = pairedRatio({ ours: v1, theirs: v045 });
      details[`drizzle.v1.${op}.perSec`] = median(v1);
      details[`drizzle.v045.${op}.perSec`] = median(v045);
    }
    return { metrics, details };
  } finally {
    cleanup();
  }
}
