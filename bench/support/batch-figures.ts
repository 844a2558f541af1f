import type { BatchSizes } from '../../src/core/statement-batch.js';

// The buckets the batch size distribution is reported in: a statement of `size` calls counts in
// the first bucket whose upper bound is at least `size`.
const BUCKETS = [1, 2, 4, 8, 16, 32, 64, 128, 256, 512] as const;

/**
 * Statements per bucket of sizes (`<prefix>.claims.upTo8`: statements of 5 to 8 calls), and the
 * mean calls per statement (`<prefix>.claims.meanSize`).
 *
 * @param prefix - the figures' prefix, e.g. `pg.batch`
 * @param kind - the batched statement, e.g. `claims`
 * @param sizes - what its batcher sent
 */
export function sizeDistribution(
  prefix: string,
  kind: string,
  sizes: BatchSizes,
): Record<string, number> {
  const figures: Record<string, number> = {};
  for (const [size, count] of Object.entries(sizes.sizes)) {
    const bucket = BUCKETS.find((bound) => Number(size) <= bound) ?? Number(size);
    const name = `${prefix}.${kind}.upTo${bucket}`;
    figures[name] = (figures[name] ?? 0) + count;
  }
  if (sizes.statements > 0) figures[`${prefix}.${kind}.meanSize`] = sizes.calls / sizes.statements;
  return figures;
}

/**
 * The statements sent between two readings of the same counters.
 *
 * @param before - the earlier reading
 * @param after - the later reading
 */
export function sizesSince(before: BatchSizes, after: BatchSizes): BatchSizes {
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

/**
 * Runs `block` while sampling the heap in use every 5 ms, and pushes its highest value, in MB, onto
 * `peaks`: what the calls a batch holds (their arguments and the statements sent) add to the heap
 * of the same load.
 *
 * @param peaks - where the peak goes
 * @param block - the timed work
 */
export async function withHeapPeak<T>(peaks: number[], block: Promise<T>): Promise<T> {
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
