import { drizzle } from 'drizzle-orm/node-postgres';
import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { ReplicationUnconfirmedError } from '../../src/core/errors.js';
import { applyPgMigrations, PgIdempotencyStore } from '../../src/pg/index.js';
import { clusterUnavailable, startPgCluster } from '../support/pg-cluster.js';
import { until } from '../support/waiting.js';

// A synchronous standby that goes away leaves commits waiting; cancelling that wait makes the
// server report success with only a WARNING, though the write may not survive a failover.
const unavailable = clusterUnavailable();
if (unavailable !== undefined && process.env.CI) {
  throw new Error(`the synchronous-wait tests need PostgreSQL's server binaries: ${unavailable}`);
}
if (unavailable !== undefined) console.warn(`synchronous-wait tests skipped: ${unavailable}`);

const fingerprint = 'c'.repeat(64);

describe.skipIf(unavailable !== undefined)('a cancelled synchronous replication wait', () => {
  it('is not success: the finish rejects with ReplicationUnconfirmedError', async () => {
    const cluster = await startPgCluster({ synchronous: true });
    const pool = new pg.Pool({ connectionString: cluster.primary.url, max: 2 });
    pool.on('error', () => undefined);
    const admin = new pg.Client({ connectionString: cluster.primary.url });
    try {
      await applyPgMigrations(drizzle({ client: pool }));
      const store = new PgIdempotencyStore(drizzle({ client: pool }));
      // A synchronous standby confirms every commit: nothing for the deployment check to warn of.
      const codes = (await store.checkDeployment()).findings.map((finding) => finding.code);
      expect(codes).not.toContain('asynchronous-standby');
      const claim = await store.acquire('k', fingerprint, {
        expires: 100,
        now: 1,
        leaseSeconds: 60,
      });
      if (claim.status !== 'acquired') throw new Error(`unexpected ${claim.status}`);
      await cluster.standby.kill();
      const finish = store.finish('k', fingerprint, { receipt: 1 }, claim.fencingToken);
      finish.catch(() => undefined);
      await admin.connect();
      const waiting = "SELECT pid FROM pg_stat_activity WHERE wait_event = 'SyncRep'";
      await until(async () => (await admin.query(waiting)).rows.length > 0, 20);
      await admin.query(`SELECT pg_cancel_backend(pid) FROM (${waiting}) AS w`);
      await expect(finish).rejects.toBeInstanceOf(ReplicationUnconfirmedError);
      await expect(finish).rejects.toMatchObject({ code: 'IDEMPOTENCY_REPLICATION_UNCONFIRMED' });
    } finally {
      await admin.end().catch(() => undefined);
      await pool.end();
      await cluster.close();
    }
  }, 120_000);
});
