import type { BatchSizes, PgBatchStats } from '../src/pg/index.js';
import { layerCycle } from './peers.js';
import { cyclesPerSecond } from './support/cycles.js';
import { median, pairedRatio, rotate } from './support/measure.js';
import { benchPool, createBenchDatabase } from './support/pg-database.js';
import type { BenchSize, GroupResult } from './support/report.js';
import { shippedPg } from './support/shipped.js';

const { openPgStore } = shippedPg;

// The pool both stores share: fewer connections than requests in flight, as a server under load
// has, so the plain store's statements queue for a connection while the batching one's share one.
const POOL_SIZE = 8;

// The buckets the batch size distribution is reported in: a statement of `size` calls counts in
// the first bucket whose upper bound is at least `size`.
const BUCKETS = [1, 2, 4, 8, 16, 32, 64, 128, 256, 512] as const;

// Statements per bucket of sizes (`pg.batch.claims.upTo8`: statements of 5 to 8 calls), and the
// mean calls per statement.
function distribution(kind: string, sizes: BatchSizes): Record<string, number> {
  const figures: Record<string, number> = {};
  for (const [size, count] of Object.entries(sizes.sizes)) {
    const bucket = BUCKETS.find((bound) => Number(size) <= bound) ?? Number(size);
    const name = `pg.batch.${kind}.upTo${bucket}`;
    figures[name] = (figures[name] ?? 0) + count;
  }
  if (sizes.statements > 0) figures[`pg.batch.${kind}.meanSize`] = sizes.calls / sizes.statements;
  return figures;
}

/**
 * Full request cycles (first request, work, answer, retry replayed) of the shipped request path on
 * the PostgreSQL store with `batch: true` against the same store without it, one pool of 8
 * connections, with 32 and with 1 request in flight, alternating. The batch size distribution of
 * the 32-in-flight runs is reported beside them.
 */
export async function pgBatch({ quick }: BenchSize): Promise<GroupResult> {
  const count = quick ? 320 : 1600;
  const rounds = quick ? 5 : 15;
  const database = await createBenchDatabase('report_pgbatch');
  const pool = benchPool(database.url, POOL_SIZE);
  try {
    const batchingStore = await openPgStore(pool, { batch: true });
    const batching = layerCycle(batchingStore);
    const plain = layerCycle(await openPgStore(pool));
    // Warm both up (JIT, connections, the server's plans) before anything is timed.
    await rotate(2, {
      ours: () => cyclesPerSecond(batching.cycle, count, 32),
      theirs: () => cyclesPerSecond(plain.cycle, count, 32),
    });
    const one = await rotate(rounds, {
      ours: () => cyclesPerSecond(batching.cycle, count / 4, 1),
      theirs: () => cyclesPerSecond(plain.cycle, count / 4, 1),
    });
    const before = batchingStore.batchStats() as PgBatchStats;
    const heapPeaks = { batching: [] as number[], plain: [] as number[] };
    const many = await rotate(rounds, {
      ours: () => withHeapPeak(heapPeaks.batching, cyclesPerSecond(batching.cycle, count, 32)),
      theirs: () => withHeapPeak(heapPeaks.plain, cyclesPerSecond(plain.cycle, count, 32)),
    });
    const after = batchingStore.batchStats() as PgBatchStats;
    const details: Record<string, number> = {
      'pg.batch.cycle1.perSec.batching': median(one.ours),
      'pg.batch.cycle1.perSec.plain': median(one.theirs),
      'pg.batch.cycle32.perSec.batching': median(many.ours),
      'pg.batch.cycle32.perSec.plain': median(many.theirs),
      'pg.batch.cycle32.heapPeakMb.batching': median(heapPeaks.batching),
      'pg.batch.cycle32.heapPeakMb.plain': median(heapPeaks.plain),
    };
    for (const kind of ['claims', 'finishes'] as const) {
      Object.assign(details, distribution(kind, since(before[kind], after[kind])));
    }
    await batching.close();
    await plain.close();
    return {
      metrics: {
        'pg.batch.cycle32.vsPlain': pairedRatio(many),
        'pg.batch.cycle1.vsPlain': pairedRatio(one),
      },
      details,
    };
  } finally {
    await pool.end();
    await database.drop();
  }
}

// The highest heap in use, in MB, sampled every 5 ms while `block` runs, pushed onto `peaks`: what
// the calls a batch holds (their arguments and the arrays sent) add to the heap of the same load.
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

// The statements sent between two readings of the same counters.
function since(before: BatchSizes, after: BatchSizes): BatchSizes {
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
