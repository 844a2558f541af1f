import type { BatchSizes } from '../../src/core/statement-batch.js';
import type { LeasedIdempotencyStore } from '../../src/index.js';
import { layerCycle } from '../peers.js';
import { cyclesPerSecond } from './cycles.js';
import { median, pairedRatio, rotate } from './measure.js';
import type { BenchSize, GroupResult } from './report.js';

// The buckets the batch size distribution is reported in: a statement of `size` calls counts in
// the first bucket whose upper bound is at least `size`.
const BUCKETS = [1, 2, 4, 8, 16, 32, 64, 128, 256, 512] as const;

// Statements per bucket of sizes (`<prefix>.claims.upTo8`: statements of 5 to 8 calls), and the
// mean calls per statement (`<prefix>.claims.meanSize`).
function sizeDistribution(prefix: string, kind: string, sizes: BatchSizes): Record<string, number> {
  const figures: Record<string, number> = {};
  for (const [size, count] of Object.entries(sizes.sizes)) {
    const bucket = BUCKETS.find((bound) => Number(size) <= bound) ?? Number(size);
    const name = `${prefix}.${kind}.upTo${bucket}`;
    figures[name] = (figures[name] ?? 0) + count;
  }
  if (sizes.statements > 0) figures[`${prefix}.${kind}.meanSize`] = sizes.calls / sizes.statements;
  return figures;
}

// The statements sent between two readings of the same counters.
function sizesSince(before: BatchSizes, after: BatchSizes): BatchSizes {
  const sizes: Record<number, number> = {};
  for (const [size, count] of Object.entries(after.sizes)) {
    const delta = count - (before.sizes[Number(size)] ?? 0);
    if (delta > 0) sizes[Number(size)] = delta;
  }
  return {
    calls: after.calls - before.calls,
    statements: after.statements - before.statements,
    sizes,
  };
}

// Runs `block` while sampling the heap in use every 5 ms, and pushes its highest value, in MB, onto
// `peaks`: what the calls a batch holds (their arguments and the statements sent) add to the heap
// of the same load.
async function withHeapPeak<T>(peaks: number[], block: Promise<T>): Promise<T> {
  let peak = process.memoryUsage().heapUsed;
  const sampler = setInterval(() => {
    peak = Math.max(peak, process.memoryUsage().heapUsed);
  }, 5);
  try {
    return await block;
  } finally {
    clearInterval(sampler);
    peaks.push(Math.max(peak, process.memoryUsage().heapUsed) / 2 ** 20);
  }
}

/** A store with `batch: true`: what it sent, by batched statement. */
type BatchingStore<K extends string> = LeasedIdempotencyStore<unknown> & {
  close(): void | Promise<void>;
  batchStats(): Readonly<Record<K, BatchSizes>> | undefined;
};

/**
 * Full request cycles (first request, work, answer, retry replayed) of the shipped request path on
 * `batching` against `plain` (the same store without `batch`), with 32 and with 1 request in
 * flight, alternating: `<prefix>.cycle{32,1}.vsPlain`, and beside them the batch size
 * distribution of each of `kinds` over the 32-in-flight runs and the heap's peak per side. Closes
 * both stores.
 *
 * @param prefix - the figures' prefix, e.g. `pg.batch`
 * @param stores - the two stores, on one pool
 * @param kinds - the batched statements to report, e.g. `['claims', 'finishes']`
 */
export async function compareBatching<K extends string>(
  prefix: string,
  stores: {
    batching: BatchingStore<K>;
    plain: LeasedIdempotencyStore<unknown> & { close(): void | Promise<void> };
  },
  kinds: readonly K[],
  { quick }: BenchSize,
): Promise<GroupResult> {
  const count = quick ? 320 : 1600;
  const rounds = quick ? 5 : 15;
  const batching = layerCycle(stores.batching);
  const plain = layerCycle(stores.plain);
  try {
    // Warm both up (JIT, connections, the server's plans and caches) before anything is timed.
    await rotate(2, {
      ours: () => cyclesPerSecond(batching.cycle, count, 32),
      theirs: () => cyclesPerSecond(plain.cycle, count, 32),
    });
    const one = await rotate(rounds, {
      ours: () => cyclesPerSecond(batching.cycle, count / 4, 1),
      theirs: () => cyclesPerSecond(plain.cycle, count / 4, 1),
    });
    const before = stores.batching.batchStats();
    const heapPeaks = { batching: [] as number[], plain: [] as number[] };
    const many = await rotate(rounds, {
      ours: () => withHeapPeak(heapPeaks.batching, cyclesPerSecond(batching.cycle, count, 32)),
      theirs: () => withHeapPeak(heapPeaks.plain, cyclesPerSecond(plain.cycle, count, 32)),
    });
    const after = stores.batching.batchStats();
    if (before === undefined || after === undefined) {
      throw new Error(`${prefix}: the batching store reports no batch statistics`);
    }
    const details: Record<string, number> = {
      [`${prefix}.cycle1.perSec.batching`]: median(one.ours),
      [`${prefix}.cycle1.perSec.plain`]: median(one.theirs),
      [`${prefix}.cycle32.perSec.batching`]: median(many.ours),
      [`${prefix}.cycle32.perSec.plain`]: median(many.theirs),
      [`${prefix}.cycle32.heapPeakMb.batching`]: median(heapPeaks.batching),
      [`${prefix}.cycle32.heapPeakMb.plain`]: median(heapPeaks.plain),
    };
    for (const kind of kinds) {
      Object.assign(details, sizeDistribution(prefix, kind, sizesSince(before[kind], after[kind])));
    }
    return {
      metrics: {
        [`${prefix}.cycle32.vsPlain`]: pairedRatio(many),
        [`${prefix}.cycle1.vsPlain`]: pairedRatio(one),
      },
      details,
    };
  } finally {
    await batching.close();
    await plain.close();
  }
}
