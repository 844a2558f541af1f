import {
  alternateCopies,
  CHECKOUT_DRIZZLE,
  installCopy,
  nodeBinary,
  packCheckout,
  sideOf,
} from './support/installs.js';
import { median, medianWithInterval, pairedRatio } from './support/measure.js';
import type { BenchSize, GroupResult, Metric } from './support/report.js';
import { benchDir } from './support/sqlite-files.js';

type Version = 'v20' | 'v24';

// The ratios measured under both Nodes: name, the child's measurement, its two sides.
const RATIOS = [
  { metric: 'peer.cycle1.vsBare', measurement: 'cycle1', ours: 'ours', theirs: 'bare' },
  { metric: 'sqlite.seal1k.vsPlain', measurement: 'seal1k', ours: 'sealed', theirs: 'plain' },
] as const;

/**
 * The same ratios under Node 20 and Node 24, in the same run: the packed package installed twice
 * outside the checkout, each copy with its own better-sqlite3 built for its Node's ABI (same
 * versions of everything else), and each round of each measurement run in a fresh child process
 * under each Node, alternating which goes first. Reports each ratio under both, the ratio of the
 * two (Node 24's ÷ Node 20's, per round), and the speed of our side and of the store's own
 * operations under 24 against 20. Reported, no targets.
 */
export async function nodeVersions({ quick }: BenchSize): Promise<GroupResult> {
  const tarball = packCheckout();
  const copies = {
    v20: installCopy('node-20', nodeBinary(20), tarball, CHECKOUT_DRIZZLE),
    v24: installCopy('node-24', nodeBinary(24), tarball, CHECKOUT_DRIZZLE),
  };
  const rounds = quick ? 3 : 11;
  const { dir, cleanup } = benchDir();
  try {
    const figures = await alternateCopies(
      copies,
      [
        { name: 'cycle1', count: 400 },
        { name: 'seal1k', count: 300 },
        { name: 'storeOps', count: 2000 },
      ],
      rounds,
      dir,
    );
    const metrics: Record<string, Metric> = {};
    const details: Record<string, number> = {};
    for (const { metric, measurement, ours, theirs } of RATIOS) {
      const ratios = (version: Version) => {
        const top = sideOf(figures, version, measurement, ours);
        const bottom = sideOf(figures, version, measurement, theirs);
        return top.map((value, round) => value / (bottom[round] as number));
      };
      metrics[`node.v20.${metric}`] = medianWithInterval(ratios('v20'));
      metrics[`node.v24.${metric}`] = medianWithInterval(ratios('v24'));
      metrics[`node.v24.vsV20.${metric}`] = pairedRatio({
        ours: ratios('v24'),
        theirs: ratios('v20'),
      });
      for (const side of [ours, theirs]) {
        const v24 = sideOf(figures, 'v24', measurement, side);
        const v20 = sideOf(figures, 'v20', measurement, side);
        details[`node.v24.${metric}.perSec.${side}`] = median(v24);
        details[`node.v20.${metric}.perSec.${side}`] = median(v20);
        if (side === ours) {
          metrics[`node.v24.vsV20.${metric}.perSec.${side}`] = pairedRatio({
            ours: v24,
            theirs: v20,
          });
        }
      }
    }
    for (const op of ['acquireFinish', 'fetch']) {
      const v24 = sideOf(figures, 'v24', 'storeOps', op);
      const v20 = sideOf(figures, 'v20', 'storeOps', op);
      metrics[`node.v24.vsV20.sqlite.${op}.perSec`] = pairedRatio({ ours: v24, theirs: v20 });
      details[`node.v24.sqlite.${op}.perSec`] = median(v24);
      details[`node.v20.sqlite.${op}.perSec`] = median(v20);
    }
    details['node.rounds'] = rounds;
    return { metrics, details };
  } finally {
    cleanup();
  }
}
