import { IdempotencyConfig, makeIdempotent } from '@aws-lambda-powertools/idempotency';
import { CachePersistenceLayer } from '@aws-lambda-powertools/idempotency/cache';
import type { IdempotencyRecord } from '@aws-lambda-powertools/idempotency/persistence';
import { Idempotency } from '@node-idempotency/core';
import { RedisStorageAdapter } from '@node-idempotency/storage-adapter-redis';
import { createClient } from '@redis/client';
import type { LeasedIdempotencyStore } from '../src/index.js';
import {
  answer,
  bareSqliteCycleWith,
  body,
  type Cycle,
  cyclesPerSecond,
  expectReplay,
  layerCycleWith,
  noop,
  type Synchronous,
  TTL_SECONDS,
} from './support/cycles.js';
import {
  check,
  median,
  medianWithInterval,
  nowMs,
  pairedRatio,
  rotate,
} from './support/measure.js';
import { type BenchRedis, type RedisDurability, startRedis } from './support/redis.js';
import type { BenchSize, GroupResult, Metric } from './support/report.js';
import { shippedHttp, shippedSqlite } from './support/shipped.js';
import { benchDir, freshStoreFile } from './support/sqlite-files.js';

const { idempotent } = shippedHttp;
const { openSqliteStore, openSqliteWorkerStore, SqliteGroupCommitStore } = shippedSqlite;

/**
 * Our shipped request path: `idempotent(store).handle()` with its default fingerprint (SHA-256 of
 * the canonical JSON of method, path and body) over the group-commit SQLite store the README
 * recommends for servers; the first request runs the handler, the retry is replayed.
 */
export function oursCycle(path: string, synchronous: Synchronous) {
  return layerCycle(new SqliteGroupCommitStore(openSqliteStore(path, { synchronous })));
}

/**
 * The same request path over the store whose statements run on a worker thread, so SQLite's work
 * takes the other core, as the Redis server's does for the peers.
 */
export async function oursWorkerCycle(path: string, synchronous: Synchronous) {
  return layerCycle(await openSqliteWorkerStore(path, { synchronous }));
}

/** {@link layerCycleWith} on the checkout's build. */
export function layerCycle(
  store: LeasedIdempotencyStore<unknown> & { close(): void | Promise<void> },
) {
  return layerCycleWith(idempotent, store);
}

/** {@link bareSqliteCycleWith} on the checkout's build. */
export function bareSqliteCycle(path: string, synchronous: Synchronous) {
  return bareSqliteCycleWith(openSqliteStore, path, synchronous);
}

/** `@node-idempotency/core` on its Redis adapter: onRequest, work, onResponse, then the retry. */
export async function nodeIdempotencyCycle(url: string) {
  const storage = new RedisStorageAdapter({ url });
  await storage.connect();
  const idempotency = new Idempotency(storage, { cacheTTLMS: TTL_SECONDS * 1000 });
  const cycle: Cycle = async (key) => {
    const request = { headers: { 'idempotency-key': key }, path: '/charges', method: 'POST', body };
    check((await idempotency.onRequest(request)) === undefined, 'a new key');
    await noop();
    await idempotency.onResponse(request, { body: answer });
    expectReplay((await idempotency.onRequest(request))?.body);
  };
  return { cycle, close: () => storage.disconnect() };
}

// Powertools 2.35.0's cache layer drops the payload hash when it records the result, so with
// payload validation on, every replay fails with IdempotencyValidationError. This writes the same
// record with the hash kept (one more field in the same SET), which is what its in-progress write
// and its other persistence layers do.
type CacheClient = ConstructorParameters<typeof CachePersistenceLayer>[0]['client'];

class CacheLayerKeepingHash extends CachePersistenceLayer {
  readonly #client: CacheClient;

  constructor(client: CacheClient) {
    super({ client });
    this.#client = client;
  }

  protected override async _updateRecord(record: IdempotencyRecord): Promise<void> {
    const item = {
      status: record.getStatus(),
      expiration: record.expiryTimestamp,
      data: record.responseData,
      validation: record.payloadHash,
    };
    const ttl = (record.expiryTimestamp ?? 0) - Math.floor(Date.now() / 1000);
    await this.#client.set(record.idempotencyKey, JSON.stringify(item), { EX: ttl });
  }
}

/**
 * `@aws-lambda-powertools/idempotency` with its cache (Redis) persistence layer, keyed on the
 * event's key and validating the payload (`payloadValidationJmesPath: 'body'`), as a user who
 * wants a reused key with another body refused would configure it.
 */
async function powertoolsCycle(url: string) {
  const client = createClient({ url });
  await client.connect();
  const config = new IdempotencyConfig({
    eventKeyJmesPath: 'key',
    payloadValidationJmesPath: 'body',
    expiresAfterSeconds: TTL_SECONDS,
  });
  // Outside Lambda there is no invocation deadline; this one stands in for it (and silences the
  // warning printed on every call without one).
  config.registerLambdaContext({ getRemainingTimeInMillis: () => 60_000 } as Parameters<
    IdempotencyConfig['registerLambdaContext']
  >[0]);
  const charge = makeIdempotent(
    async (_event: { key: string; body: unknown }) => {
      await noop();
      return answer;
    },
    { persistenceStore: new CacheLayerKeepingHash(client), config },
  );
  const cycle: Cycle = async (key) => {
    await charge({ key, body });
    expectReplay(await charge({ key, body }));
  };
  // One round trip to Redis, the unit a network store pays per call, for reading the ratios.
  const roundTripMicros = async (count: number) => {
    const start = nowMs();
    for (let i = 0; i < count; i++) await client.ping();
    return ((nowMs() - start) * 1000) / count;
  };
  return {
    cycle,
    roundTripMicros,
    close: async () => {
      await client.quit();
    },
  };
}

/**
 * {@link cyclesPerSecond} with one in flight, also pushing onto `cpu` this process's CPU time (user
 * and system) per cycle of the run, in microseconds.
 */
async function cyclesPerSecondWithCpu(cycle: Cycle, count: number, cpu: number[]) {
  const start = process.cpuUsage();
  const perSecond = await cyclesPerSecond(cycle, count, 1);
  const used = process.cpuUsage(start);
  cpu.push((used.user + used.system) / count);
  return perSecond;
}

/**
 * CPU microseconds per cycle with 32 in flight, over one run of `count` cycles: this process's
 * (user and system, every thread) and the Redis server's. Long runs, since the server's CPU time
 * is counted in 10 ms ticks.
 */
async function cpuPerCycle(cycle: Cycle, redis: BenchRedis, count: number) {
  const node = process.cpuUsage();
  const server = redis.cpuSeconds();
  await cyclesPerSecond(cycle, count, 32);
  const used = process.cpuUsage(node);
  return {
    node: (used.user + used.system) / count,
    redis: ((redis.cpuSeconds() - server) * 1e6) / count,
  };
}

/**
 * How much the process's resident memory grew, in MB, from before a store is opened to after it
 * served `count` cycles at 32 in flight: the worker store's thread (its V8 isolate, its connection)
 * shows here, since a worker thread lives in the process. One reading, garbage collection unforced:
 * a rough size, not a ratio.
 */
async function rssGrowthMB(open: () => Promise<{ cycle: Cycle; close(): unknown }>) {
  const before = process.memoryUsage.rss();
  const side = await open();
  try {
    await cyclesPerSecond(side.cycle, 2_000, 32);
    return (process.memoryUsage.rss() - before) / 2 ** 20;
  } finally {
    await side.close();
  }
}

interface Round {
  readonly redis: RedisDurability;
  readonly sqlite: Synchronous;
  /** Metric name prefix: `peer.` for the round with the targets, `peer.<name>.` for the others. */
  readonly prefix: string;
  readonly count: number;
  readonly rounds: number;
  /** Cycles of the one long run per side that measures CPU time. */
  readonly cpuCycles: number;
}

async function measureRound(round: Round, dir: string) {
  const redis: BenchRedis = await startRedis(round.redis);
  const ours = oursCycle(freshStoreFile(dir), round.sqlite);
  const worker = await oursWorkerCycle(freshStoreFile(dir), round.sqlite);
  const bare = bareSqliteCycle(freshStoreFile(dir), round.sqlite);
  const nodeIdem = await nodeIdempotencyCycle(redis.url);
  const powertools = await powertoolsCycle(redis.url);
  const { count, rounds, prefix } = round;
  try {
    // Warm every side up (JIT, connections, caches) before anything is timed.
    await rotate(3, {
      ours: () => cyclesPerSecond(ours.cycle, count, 32),
      worker: () => cyclesPerSecond(worker.cycle, count, 32),
      bare: () => cyclesPerSecond(bare.cycle, count, 1),
      nodeIdem: () => cyclesPerSecond(nodeIdem.cycle, count, 32),
      powertools: () => cyclesPerSecond(powertools.cycle, count, 32),
    });
    // The process's CPU time of each timed round of ours and of the bare cycle, one in flight.
    const oneCpu = { ours: [] as number[], bare: [] as number[] };
    const one = await rotate(rounds, {
      ours: () => cyclesPerSecondWithCpu(ours.cycle, count, oneCpu.ours),
      worker: () => cyclesPerSecond(worker.cycle, count, 1),
      bare: () => cyclesPerSecondWithCpu(bare.cycle, count, oneCpu.bare),
      theirs: () => cyclesPerSecond(nodeIdem.cycle, count, 1),
    });
    const many = await rotate(rounds, {
      ours: () => cyclesPerSecond(ours.cycle, count, 32),
      worker: () => cyclesPerSecond(worker.cycle, count, 32),
      theirs: () => cyclesPerSecond(nodeIdem.cycle, count, 32),
    });
    const manyPowertools = await rotate(rounds, {
      ours: () => cyclesPerSecond(ours.cycle, count, 32),
      worker: () => cyclesPerSecond(worker.cycle, count, 32),
      theirs: () => cyclesPerSecond(powertools.cycle, count, 32),
    });
    const roundTrip = await powertools.roundTripMicros(count);
    // Where each side's CPU goes with 32 in flight: ours all in this process; the peers' split
    // between this process and the Redis server, which runs on the other core.
    const cpu = {
      ours: await cpuPerCycle(ours.cycle, redis, round.cpuCycles),
      worker: await cpuPerCycle(worker.cycle, redis, round.cpuCycles),
      nodeIdem: await cpuPerCycle(nodeIdem.cycle, redis, round.cpuCycles),
      powertools: await cpuPerCycle(powertools.cycle, redis, round.cpuCycles),
    };
    const metrics: Record<string, Metric> = {
      [`${prefix}cycle1.vsBare`]: pairedRatio({ ours: one.ours, theirs: one.bare }),
      [`${prefix}cycle1.vsNodeIdempotencyRedis`]: pairedRatio(one),
      [`${prefix}cycle32.vsNodeIdempotencyRedis`]: pairedRatio(many),
      [`${prefix}cycle32.vsPowertoolsRedis`]: pairedRatio(manyPowertools),
      [`${prefix}cycle1.cpuMicrosPerCycle.ours`]: medianWithInterval(oneCpu.ours),
      [`${prefix}cycle1.cpuMicrosPerCycle.bare`]: medianWithInterval(oneCpu.bare),
      [`${prefix}cycle1.worker.vsBare`]: pairedRatio({ ours: one.worker, theirs: one.bare }),
      [`${prefix}cycle1.worker.vsGroupCommit`]: pairedRatio({ ours: one.worker, theirs: one.ours }),
      [`${prefix}cycle32.worker.vsGroupCommit`]: pairedRatio({
        ours: many.worker,
        theirs: many.ours,
      }),
      [`${prefix}cycle32.worker.vsNodeIdempotencyRedis`]: pairedRatio({
        ours: many.worker,
        theirs: many.theirs,
      }),
      [`${prefix}cycle32.worker.vsPowertoolsRedis`]: pairedRatio({
        ours: manyPowertools.worker,
        theirs: manyPowertools.theirs,
      }),
    };
    const details: Record<string, number> = {
      [`${prefix}cycle1.perSec.ours`]: median(one.ours),
      [`${prefix}cycle1.perSec.bareSqlite`]: median(one.bare),
      [`${prefix}cycle1.perSec.nodeIdempotencyRedis`]: median(one.theirs),
      [`${prefix}cycle1.bareSqliteVsNodeIdempotencyRedis`]: pairedRatio({
        ours: one.bare,
        theirs: one.theirs,
      }).value,
      [`${prefix}cycle32.perSec.ours`]: median(many.ours),
      [`${prefix}cycle32.perSec.nodeIdempotencyRedis`]: median(many.theirs),
      [`${prefix}cycle32.perSec.oursBesidePowertools`]: median(manyPowertools.ours),
      [`${prefix}cycle32.perSec.powertoolsRedis`]: median(manyPowertools.theirs),
      [`${prefix}redis.roundTripMicros`]: roundTrip,
      [`${prefix}cycle32.cpuMicrosPerCycle.ours`]: cpu.ours.node,
      [`${prefix}cycle32.cpuMicrosPerCycle.worker`]: cpu.worker.node,
      [`${prefix}cycle1.perSec.worker`]: median(one.worker),
      [`${prefix}cycle32.perSec.worker`]: median(many.worker),
      [`${prefix}cycle32.cpuMicrosPerCycle.nodeIdempotencyNode`]: cpu.nodeIdem.node,
      [`${prefix}cycle32.cpuMicrosPerCycle.nodeIdempotencyRedis`]: cpu.nodeIdem.redis,
      [`${prefix}cycle32.cpuMicrosPerCycle.powertoolsNode`]: cpu.powertools.node,
      [`${prefix}cycle32.cpuMicrosPerCycle.powertoolsRedis`]: cpu.powertools.redis,
    };
    return { metrics, details };
  } finally {
    await ours.close();
    await worker.close();
    bare.close();
    await nodeIdem.close();
    await powertools.close();
    await redis.stop();
  }
}

/**
 * Full request cycles (first request, work, answer, retry replayed) of our shipped request path on
 * SQLite against `@node-idempotency/core` and Powertools' `makeIdempotent` on a Redis started for
 * the benchmark, with 1 and 32 requests in flight, the bare SQLite cycle beside them, in three
 * durability pairings: Redis keeping nothing on disk against SQLite `NORMAL` (the targets), an
 * append-only file synced every second against `NORMAL`, and synced on every write against `FULL`.
 */
export async function peers({ quick }: BenchSize): Promise<GroupResult> {
  const { dir, cleanup } = benchDir();
  const rounds: Round[] = [
    {
      redis: 'none',
      sqlite: 'NORMAL',
      prefix: 'peer.',
      count: 400,
      rounds: quick ? 9 : 31,
      cpuCycles: quick ? 5_000 : 20_000,
    },
    {
      redis: 'everysec',
      sqlite: 'NORMAL',
      prefix: 'peer.aofEverysec.',
      count: 400,
      rounds: quick ? 5 : 15,
      cpuCycles: quick ? 5_000 : 20_000,
    },
    // An fsync per write: far fewer cycles a second, so smaller blocks.
    {
      redis: 'always',
      sqlite: 'FULL',
      prefix: 'peer.aofAlways.',
      count: 100,
      rounds: quick ? 3 : 9,
      cpuCycles: quick ? 1_000 : 4_000,
    },
  ];
  try {
    const metrics: Record<string, Metric> = {};
    const details: Record<string, number> = {
      'peer.rssGrowthMB.groupCommit': await rssGrowthMB(async () =>
        oursCycle(freshStoreFile(dir), 'NORMAL'),
      ),
      'peer.rssGrowthMB.worker': await rssGrowthMB(() =>
        oursWorkerCycle(freshStoreFile(dir), 'NORMAL'),
      ),
    };
    for (const round of rounds) {
      const result = await measureRound(round, dir);
      Object.assign(metrics, result.metrics);
      Object.assign(details, result.details);
    }
    return { metrics, details };
  } finally {
    cleanup();
  }
}
