import { createHash } from 'node:crypto';
import { IdempotencyConfig, makeIdempotent } from '@aws-lambda-powertools/idempotency';
import { CachePersistenceLayer } from '@aws-lambda-powertools/idempotency/cache';
import { Idempotency } from '@node-idempotency/core';
import { RedisStorageAdapter } from '@node-idempotency/storage-adapter-redis';
import { createClient } from '@redis/client';
import canonicalize from 'canonicalize';
import { openSqliteStore, SqliteGroupCommitStore } from '../src/sqlite/index.js';
import { alternate, median, medianRatio, nowMs, rotate } from './support/measure.js';
import type { BenchSize, GroupResult } from './support/report.js';
import { benchDir, freshStoreFile } from './support/sqlite-files.js';

const REDIS_URL = 'redis://127.0.0.1:6379';
// Short-lived keys: the benchmark leaves nothing behind in a shared Redis.
const TTL_SECONDS = 120;

type Cycle = (key: string) => Promise<void>;

// The request every cycle sends, and the "work" each first request does: nothing, but async, so
// requests in flight interleave as they do in a server.
const body = { amount: 4200, currency: 'EUR', customer: 'cus_123', items: [{ sku: 'a', qty: 2 }] };
const noop = () => new Promise<void>((resolve) => setImmediate(resolve));

function expectReplay(answer: unknown): void {
  if ((answer as { charged?: unknown } | null | undefined)?.charged !== 4200) {
    throw new Error(`the replay did not return the stored answer: ${JSON.stringify(answer)}`);
  }
}

/**
 * Our cycle on a SQLite file: fingerprint the body, look the key up (a replay is answered from a
 * read), reserve it, do the work, finish; then the retry: fingerprint again, read, replay.
 */
function oursCycle(path: string) {
  const store = new SqliteGroupCommitStore(openSqliteStore<{ charged: number }>(path));
  const fingerprint = (payload: unknown) =>
    createHash('sha256')
      .update(canonicalize(payload) ?? '')
      .digest('base64url');
  const handle = async (key: string, payload: unknown) => {
    const digest = fingerprint(payload);
    const now = Date.now() / 1000;
    const record = await store.get(key);
    if (record !== null) {
      if (record.fingerprint !== digest) throw new Error('422: key reused with another payload');
      if (record.status !== 'done' || record.expires <= now) throw new Error('409: in flight');
      return record.response;
    }
    if (!(await store.reserve(key, digest, now + TTL_SECONDS)))
      throw new Error('409: lost the race');
    await noop();
    const answer = { charged: 4200 };
    await store.finish(key, digest, answer);
    return answer;
  };
  const cycle: Cycle = async (key) => {
    await handle(key, body);
    expectReplay(await handle(key, body));
  };
  return { cycle, close: () => store.close(), batches: () => store.batches };
}

/**
 * The least any durable SQLite cycle does, written straight on better-sqlite3 with the store's file
 * and pragmas: one autocommit insert, the work, one autocommit update, one read of the answer. No
 * fingerprint, no lookup before the insert, no argument checks. Its ratio to a peer bounds what any
 * SQLite implementation of the cycle can reach on this machine.
 */
function bareSqliteCycle(path: string) {
  const store = openSqliteStore(path);
  const db = store.db.$client;
  const insert = db.prepare(
    "INSERT INTO keys (id, fingerprint, status, expires) VALUES (?, 'd', 'pending', ?) ON CONFLICT DO NOTHING",
  );
  const update = db.prepare(
    "UPDATE keys SET status = 'done', response = ? WHERE id = ? AND fingerprint = 'd' AND status = 'pending'",
  );
  const select = db.prepare('SELECT response FROM keys WHERE id = ?').pluck();
  const cycle: Cycle = async (key) => {
    if (insert.run(key, Date.now() / 1000 + TTL_SECONDS).changes !== 1) throw new Error('not new');
    await noop();
    update.run(JSON.stringify({ charged: 4200 }), key);
    expectReplay(JSON.parse(select.get(key) as string));
  };
  return { cycle, close: () => store.close() };
}

/** `@node-idempotency/core` on its Redis adapter: onRequest, work, onResponse, then the retry. */
async function nodeIdempotencyCycle() {
  const storage = new RedisStorageAdapter({ url: REDIS_URL });
  await storage.connect();
  const idempotency = new Idempotency(storage, { cacheTTLMS: TTL_SECONDS * 1000 });
  const cycle: Cycle = async (key) => {
    const request = {
      headers: { 'idempotency-key': key },
      path: '/charges',
      method: 'POST',
      body,
    };
    if ((await idempotency.onRequest(request)) !== undefined) throw new Error('not a new key');
    await noop();
    await idempotency.onResponse(request, { body: { charged: 4200 } });
    expectReplay((await idempotency.onRequest(request))?.body);
  };
  return { cycle, close: () => storage.disconnect() };
}

/** `@aws-lambda-powertools/idempotency` with its cache (Redis) persistence layer. */
async function powertoolsCycle() {
  const client = await createClient({ url: REDIS_URL }).connect();
  // No payload validation: in 2.35.0 the cache layer drops the payload hash when it stores the
  // result, so every replay with payloadValidationJmesPath set fails with IdempotencyValidationError.
  const config = new IdempotencyConfig({
    eventKeyJmesPath: 'key',
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
      return { charged: 4200 };
    },
    {
      persistenceStore: new CachePersistenceLayer({ client }),
      config,
    },
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

// Full cycles per second with `inFlight` requests running at once, each on a fresh key.
async function cyclesPerSecond(cycle: Cycle, prefix: string, count: number, inFlight: number) {
  let next = 0;
  const worker = async () => {
    while (next < count) {
      const index = next++;
      await cycle(`${prefix}-${index}`);
    }
  };
  const start = nowMs();
  await Promise.all(Array.from({ length: inFlight }, worker));
  return count / ((nowMs() - start) / 1000);
}

/**
 * Full request cycles (fingerprint, reserve, work, finish, replay) of ours on SQLite against
 * `@node-idempotency/core` and AWS Powertools idempotency on the local Redis, with 1 and with 32
 * requests in flight, the sides alternating in this process.
 */
export async function peers({ quick }: BenchSize): Promise<GroupResult> {
  const count = 400;
  const rounds = quick ? 9 : 31;
  const run = `${process.pid}-${Date.now()}`;
  const { dir, cleanup } = benchDir();
  const ours = oursCycle(freshStoreFile(dir));
  const bare = bareSqliteCycle(freshStoreFile(dir));
  const nodeIdem = await nodeIdempotencyCycle();
  const powertools = await powertoolsCycle();
  try {
    const compare = (inFlight: number, theirs: Cycle, name: string) =>
      alternate(
        rounds,
        (round) =>
          cyclesPerSecond(ours.cycle, `ours-${name}-${inFlight}-${round}`, count, inFlight),
        (round) =>
          cyclesPerSecond(theirs, `bench-${run}-${name}-${inFlight}-${round}`, count, inFlight),
      );
    // Warm both sides up (JIT, connections) before anything is timed.
    await compare(32, nodeIdem.cycle, 'warm');
    // One in flight, with the bare SQLite cycle in the same rounds as the ceiling of the ratio.
    const oneSides = await rotate(rounds, {
      ours: (round) => cyclesPerSecond(ours.cycle, `ours-ni-1-${round}`, count, 1),
      bare: (round) => cyclesPerSecond(bare.cycle, `bare-ni-1-${round}`, count, 1),
      theirs: (round) => cyclesPerSecond(nodeIdem.cycle, `bench-${run}-ni-1-${round}`, count, 1),
    });
    const one = { ours: oneSides.ours, theirs: oneSides.theirs };
    const many = await compare(32, nodeIdem.cycle, 'ni');
    const manyPowertools = await compare(32, powertools.cycle, 'pt');
    const roundTrip = await powertools.roundTripMicros(count);
    return {
      metrics: {
        'peer.cycle1.vsNodeIdempotencyRedis': medianRatio(one),
        'peer.cycle32.vsNodeIdempotencyRedis': medianRatio(many),
        'peer.cycle32.vsPowertoolsRedis': medianRatio(manyPowertools),
      },
      details: {
        'peer.cycle1.perSec.ours': median(one.ours),
        'peer.cycle1.perSec.nodeIdempotencyRedis': median(one.theirs),
        'peer.cycle1.perSec.bareSqlite': median(oneSides.bare),
        'peer.cycle1.bareSqliteVsNodeIdempotencyRedis': medianRatio({
          ours: oneSides.bare,
          theirs: oneSides.theirs,
        }),
        'peer.cycle32.perSec.ours': median(many.ours),
        'peer.cycle32.perSec.nodeIdempotencyRedis': median(many.theirs),
        'peer.cycle32.perSec.oursBesidePowertools': median(manyPowertools.ours),
        'peer.cycle32.perSec.powertoolsRedis': median(manyPowertools.theirs),
        'peer.redis.roundTripMicros': roundTrip,
      },
    };
  } finally {
    await ours.close();
    bare.close();
    await nodeIdem.close();
    await powertools.close();
    cleanup();
  }
}
