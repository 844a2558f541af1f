import { drizzle } from 'drizzle-orm/node-postgres';
import { withReplicas } from 'drizzle-orm/pg-core';
import pg from 'pg';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { applyPgMigrations, PgIdempotencyStore } from '../../src/pg/index.js';
import { clusterUnavailable, type PgCluster, startPgCluster } from '../support/pg-cluster.js';
import { until } from '../support/waiting.js';

// drizzle's withReplicas over a primary and an asynchronous standby of our own that lags 20 ms,
// so a read there right after a write on the primary misses it (docs/topologies.md, "Read
// replicas").
const unavailable = clusterUnavailable();
if (unavailable !== undefined && process.env.CI) {
  throw new Error(`the replica tests need PostgreSQL's server binaries: ${unavailable}`);
}
if (unavailable !== undefined) console.warn(`replica tests skipped: ${unavailable}`);

const fingerprint = 'd'.repeat(64);
const KEYS = 200;

describe.skipIf(unavailable !== undefined)('a store over withReplicas', () => {
  let cluster: PgCluster;
  const pools: pg.Pool[] = [];
  const pool = (url: string) => {
    const created = new pg.Pool({ connectionString: url, max: 4 });
    created.on('error', () => undefined);
    pools.push(created);
    return created;
  };
  let db: ReturnType<typeof replicated>;
  const replicated = () =>
    withReplicas(drizzle({ client: pool(cluster.primary.url) }), [
      drizzle({ client: pool(cluster.standby.url) }),
    ]);

  beforeAll(async () => {
    cluster = await startPgCluster({ synchronous: false, lagMs: 20 });
    db = replicated();
    await applyPgMigrations(db);
  }, 120_000);
  // A CI run once found the standby gone from pg_stat_replication mid-file: print what both
  // servers logged whenever a test here fails.
  beforeEach(({ onTestFailed }) => {
    onTestFailed(async () => console.error(await cluster.logTail()));
  });
  afterAll(async () => {
    await Promise.all(pools.map((each) => each.end().catch(() => undefined)));
    await cluster?.close();
  });

  it('decides and writes on the primary: a finished key replays at once, never in progress', async () => {
    const store = new PgIdempotencyStore<{ n: number }>(db);
    for (let n = 0; n < KEYS; n += 1) {
      const key = `decide-${n}`;
      const claim = await store.acquire(key, fingerprint, {
        expires: 100,
        now: 1,
        leaseSeconds: 30,
      });
      expect(claim.status).toBe('acquired');
      if (claim.status !== 'acquired') continue;
      expect(await store.finish(key, fingerprint, { n }, claim.fencingToken)).toBe(true);
      const again = await store.acquire(key, fingerprint, {
        expires: 100,
        now: 2,
        leaseSeconds: 30,
      });
      expect(again.status).toBe('done');
      expect(await store.fetch(key, 2)).toEqual({ n });
    }
  });

  it('purges and sweeps through withReplicas', async () => {
    const store = new PgIdempotencyStore<{ n: number }>(db);
    for (let n = 0; n < 20; n += 1) {
      expect(await store.reserve(`old-${n}`, fingerprint, 5)).toBe(true);
      expect(await store.finish(`old-${n}`, fingerprint, { n })).toBe(true);
    }
    expect(await store.purge(10, 10)).toHaveLength(10);
    expect(await store.sweepBatch(10, 100)).toBe(10);
    expect(await store.expired(10, 100)).toEqual([]);
  });

  it("with replays: 'replica', a miss on the lagging replica is read again on the primary", async () => {
    const store = new PgIdempotencyStore<{ n: number }>(db, { replays: 'replica' });
    for (let n = 0; n < KEYS; n += 1) {
      const key = `replica-${n}`;
      expect(await store.reserve(key, fingerprint, 100)).toBe(true);
      expect(await store.finish(key, fingerprint, { n })).toBe(true);
      expect(await store.fetch(key, 2)).toEqual({ n });
    }
  });

  it('the deployment check warns of the asynchronous standby, and of a connection to it', async () => {
    const store = new PgIdempotencyStore(db);
    await cluster.streaming();
    const onPrimary = (await store.checkDeployment()).findings.map((finding) => finding.code);
    expect(onPrimary).toContain('asynchronous-standby');
    const standby = new PgIdempotencyStore(drizzle({ client: pool(cluster.standby.url) }));
    const onStandby = (await standby.checkDeployment()).findings.map((finding) => finding.code);
    expect(onStandby).toContain('standby-connection');
  });

  it("with replays: 'replica', answers come from the replica while the primary is down", async () => {
    const store = new PgIdempotencyStore<{ n: number }>(db, { replays: 'replica' });
    const onPrimary = new PgIdempotencyStore<{ n: number }>(db);
    expect(await store.reserve('kept', fingerprint, 100)).toBe(true);
    expect(await store.finish('kept', fingerprint, { n: 7 })).toBe(true);
    const standby = new PgIdempotencyStore<{ n: number }>(
      drizzle({ client: pool(cluster.standby.url) }),
    );
    await until(async () => (await standby.fetch('kept', 2)) !== null, 20);
    await cluster.primary.kill();
    expect(await store.fetch('kept', 2)).toEqual({ n: 7 });
    await expect(onPrimary.fetch('kept', 2)).rejects.toThrow();
    await expect(
      store.acquire('new', fingerprint, { expires: 100, now: 1, leaseSeconds: 30 }),
    ).rejects.toThrow();
  });

  it("refuses a replays option other than 'primary' or 'replica'", () => {
    expect(
      () => new PgIdempotencyStore(db, { replays: 'nearest' as unknown as 'replica' }),
    ).toThrow(/replays must be/);
  });
});
