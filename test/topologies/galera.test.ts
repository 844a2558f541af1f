import { drizzle } from 'drizzle-orm/mysql2';
import mysql from 'mysql2/promise';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mysqlMigrations } from '../../src/generated/migrations.js';
import { applyMysqlMigrations, MysqlIdempotencyStore } from '../../src/mysql/index.js';
import {
  type GaleraCluster,
  galeraUnavailable,
  startGaleraCluster,
} from '../support/galera-cluster.js';

// A three-node MariaDB Galera cluster of our own on loopback (Debian's galera-4, rsync state
// transfer). CI installs what it needs and fails here without it; elsewhere the suite is skipped.
const unavailable = galeraUnavailable();
if (unavailable !== undefined && process.env.CI) {
  throw new Error(`the Galera tests need galera-4 and rsync: ${unavailable}`);
}
if (unavailable !== undefined) console.warn(`Galera tests skipped: ${unavailable}`);

const fingerprint = 'e'.repeat(64);

describe.skipIf(unavailable !== undefined)('MariaDB Galera, three nodes', () => {
  let cluster: GaleraCluster;
  const pools: mysql.Pool[] = [];
  let databases = 0;
  // Two instances' pools per node, on a database of the test's own.
  const poolsOn = async (perNode: number, connectionLimit = 4) => {
    databases += 1;
    const database = `galera_${databases}`;
    await cluster.createDatabase(database);
    return cluster.nodes.flatMap((node) =>
      Array.from({ length: perNode }, () => {
        const pool = mysql.createPool({ uri: node.url(database), connectionLimit });
        pools.push(pool);
        return pool;
      }),
    );
  };

  beforeAll(async () => {
    cluster = await startGaleraCluster();
  }, 240_000);
  afterAll(async () => {
    await Promise.all(pools.map((pool) => pool.end().catch(() => undefined)));
    await cluster?.close();
  });

  it('migrations started on every node at once all succeed', async () => {
    const instances = await poolsOn(2);
    const results = await Promise.allSettled(
      instances.map((pool) => applyMysqlMigrations(drizzle({ client: pool }))),
    );
    expect(results.filter((result) => result.status === 'rejected')).toEqual([]);
    const store = new MysqlIdempotencyStore(drizzle({ client: instances[2] as mysql.Pool }));
    expect(await store.reserve('after-migration', fingerprint, 10)).toBe(true);
  });

  it('six instances opened at once on three nodes record each migration once in the journal', async () => {
    const instances = await poolsOn(2);
    const results = await Promise.allSettled(
      instances.map((pool) => applyMysqlMigrations(drizzle({ client: pool }))),
    );
    expect(results.filter((result) => result.status === 'rejected')).toEqual([]);
    const expected = mysqlMigrations.map((migration) => migration.hash).sort();
    // Every node's own journal, each read once it applied what the cluster committed before.
    for (const pool of instances.filter((_, index) => index % 2 === 0)) {
      const connection = await pool.getConnection();
      try {
        await connection.query('SET SESSION wsrep_sync_wait = 1');
        const [rows] = await connection.query(
          'SELECT hash FROM `__idempotency_migrations` ORDER BY hash',
        );
        expect((rows as { hash: string }[]).map((row) => row.hash)).toEqual(expected);
      } finally {
        connection.release();
      }
    }
  });

  it('the deployment check says the server is a Galera node', async () => {
    const [pool] = await poolsOn(1);
    await applyMysqlMigrations(drizzle({ client: pool as mysql.Pool }));
    const store = new MysqlIdempotencyStore(drizzle({ client: pool as mysql.Pool }));
    const codes = (await store.checkDeployment()).findings.map((finding) => finding.code);
    expect(codes).toContain('galera');
  });

  it('keeps one winner per key when every node contends for it', async () => {
    const instances = await poolsOn(1, 4);
    await applyMysqlMigrations(drizzle({ client: instances[0] as mysql.Pool }));
    const stores = instances.map((pool) => new MysqlIdempotencyStore(drizzle({ client: pool })));
    const KEYS = 100;
    const CONTENDERS_PER_NODE = 4;
    const winners = new Map<string, number>();
    await Promise.all(
      stores.flatMap((store) =>
        Array.from({ length: CONTENDERS_PER_NODE }, async () => {
          for (let n = 0; n < KEYS; n += 1) {
            const key = `contended-${n}`;
            const claim = await store.acquire(key, fingerprint, {
              expires: 100,
              now: 1,
              leaseSeconds: 60,
            });
            if (claim.status === 'acquired') winners.set(key, (winners.get(key) ?? 0) + 1);
            else expect(claim.status).toBe('inProgress');
          }
        }),
      ),
    );
    expect(winners.size).toBe(KEYS);
    expect([...winners.values()].every((count) => count === 1)).toBe(true);
  });

  it('sweeps on every node finish without an error and delete every expired answer once', async () => {
    const instances = await poolsOn(2);
    await applyMysqlMigrations(drizzle({ client: instances[0] as mysql.Pool }));
    const stores = instances.map((pool) => new MysqlIdempotencyStore(drizzle({ client: pool })));
    const seeder = stores[0] as MysqlIdempotencyStore;
    const EXPIRED = 3000;
    const rows = Array.from({ length: EXPIRED }, (_, n) => n);
    await (instances[0] as mysql.Pool).query(
      'INSERT INTO `keys` (id, fingerprint, status, response, expires) VALUES ?',
      [rows.map((n) => [`old-${n}`, fingerprint, 'done', '{}', 5])],
    );
    for (let n = 0; n < 20; n += 1)
      expect(await seeder.reserve(`live-${n}`, fingerprint, 5)).toBe(true);
    const deleted = await Promise.all(
      stores.map(async (store) => {
        let total = 0;
        for (;;) {
          const batch = await store.sweepBatch(10, 100);
          total += batch;
          if (batch === 0) return total;
        }
      }),
    );
    expect(deleted.reduce((sum, count) => sum + count, 0)).toBe(EXPIRED);
    expect(await seeder.counts()).toEqual({ pending: 20, done: 0 });
  });
});
