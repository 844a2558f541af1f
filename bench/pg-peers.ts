import type pg from 'pg';
import { layerCycle, nodeIdempotencyCycle } from './peers.js';
import { cyclesPerSecond } from './support/cycles.js';
import { median, pairedRatio, rotate } from './support/measure.js';
import { benchPool, createBenchDatabase } from './support/pg-database.js';
import { type RedisDurability, startRedis } from './support/redis.js';
import type { BenchSize, GroupResult, Metric } from './support/report.js';
import { IN_FLIGHT } from './support/server-ops.js';
import { shippedPg } from './support/shipped.js';

const { openPgStore } = shippedPg;

// Our shipped request path over the PostgreSQL store on `pool`, as bench/peers.ts runs it over
// SQLite, with the concurrent requests' statements batched (`pg-batch` compares it with the store
// without batching).
async function pgCycle(pool: pg.Pool) {
  return layerCycle(await openPgStore(pool, { batch: true }));
}

interface Pairing {
  readonly redis: RedisDurability;
  /** Metric name prefix: `peer.pg.` for Redis keeping nothing, `peer.pg.<name>.` otherwise. */
  readonly prefix: string;
  readonly count: number;
  readonly rounds: number;
}

async function measurePairing(pairing: Pairing, pool: pg.Pool) {
  const redis = await startRedis(pairing.redis);
  const ours = await pgCycle(pool);
  const theirs = await nodeIdempotencyCycle(redis.url);
  const { count, rounds, prefix } = pairing;
  try {
    // Warm both sides up (JIT, connections, caches, the server's plans) before anything is timed.
    await rotate(2, {
      ours: () => cyclesPerSecond(ours.cycle, count, 32),
      theirs: () => cyclesPerSecond(theirs.cycle, count, 32),
    });
    const one = await rotate(rounds, {
      ours: () => cyclesPerSecond(ours.cycle, count, 1),
      theirs: () => cyclesPerSecond(theirs.cycle, count, 1),
    });
    const many = await rotate(rounds, {
      ours: () => cyclesPerSecond(ours.cycle, count, 32),
      theirs: () => cyclesPerSecond(theirs.cycle, count, 32),
    });
    const metrics: Record<string, Metric> = {
      [`${prefix}cycle1.vsNodeIdempotencyRedis`]: pairedRatio(one),
      [`${prefix}cycle32.vsNodeIdempotencyRedis`]: pairedRatio(many),
    };
    const details: Record<string, number> = {
      [`${prefix}cycle1.perSec.ours`]: median(one.ours),
      [`${prefix}cycle1.perSec.nodeIdempotencyRedis`]: median(one.theirs),
      [`${prefix}cycle32.perSec.ours`]: median(many.ours),
      [`${prefix}cycle32.perSec.nodeIdempotencyRedis`]: median(many.theirs),
    };
    return { metrics, details };
  } finally {
    await ours.close();
    await theirs.close();
    await redis.stop();
  }
}

/**
 * Full request cycles (first request, work, answer, retry replayed) of our shipped request path
 * on the PostgreSQL store with `batch: true` (node-postgres, a pool of 8, the server committing
 * with fsync and synchronous_commit on) against `@node-idempotency/core` on a Redis started for the benchmark,
 * with 1 and 32 requests in flight, alternating, in two pairings: Redis keeping nothing on disk
 * (the figures beside bench/peers.ts's) and Redis syncing its append-only file on every write, the
 * durability PostgreSQL gives every commit here.
 */
export async function pgPeers({ quick }: BenchSize): Promise<GroupResult> {
  const pairings: Pairing[] = [
    { redis: 'none', prefix: 'peer.pg.', count: 200, rounds: quick ? 5 : 21 },
    { redis: 'always', prefix: 'peer.pg.aofAlways.', count: 100, rounds: quick ? 3 : 11 },
  ];
  const database = await createBenchDatabase('report_pgpeers');
  const pool = benchPool(database.url, IN_FLIGHT);
  try {
    const metrics: Record<string, Metric> = {};
    const details: Record<string, number> = {};
    for (const pairing of pairings) {
      const result = await measurePairing(pairing, pool);
      Object.assign(metrics, result.metrics);
      Object.assign(details, result.details);
    }
    return { metrics, details };
  } finally {
    await pool.end();
    await database.drop();
  }
}
