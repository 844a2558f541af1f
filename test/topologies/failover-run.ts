import { drizzle } from 'drizzle-orm/node-postgres';
import pg from 'pg';
import { applyPgMigrations, PgIdempotencyStore } from '../../src/pg/index.js';
import type { PgCluster } from '../support/pg-cluster.js';

/** What one failover round counted. */
export interface FailoverCounts {
  /** Keys whose `finish` returned `true` before the primary died. */
  readonly acknowledgedBeforeKill: number;
  /** Keys whose `finish` returned `true` in the whole round. */
  readonly acknowledged: number;
  /** Keys holding their answer on the promoted server once every client is done. */
  readonly storedAtEnd: number;
  /** Acknowledged answers that the promoted standby does not hold. */
  readonly lost: number;
  /** Handler runs for a key whose answer had already been acknowledged. */
  readonly ranTwice: number;
  /** Operations that failed because the primary went away (retried after the failover). */
  readonly failedOperations: number;
}

const LEASE_SECONDS = 1;
const fingerprint = 'f'.repeat(64);
const seconds = () => Date.now() / 1000;
const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

interface Connection {
  readonly pool: pg.Pool;
  readonly store: PgIdempotencyStore<{ key: string }>;
}

function connect(url: string, max: number): Connection {
  const pool = new pg.Pool({ connectionString: url, max, connectionTimeoutMillis: 5000 });
  // A server killed under the pool makes idle clients emit `error`; the pool drops them.
  pool.on('error', () => undefined);
  return { pool, store: new PgIdempotencyStore(drizzle({ client: pool })) };
}

/**
 * Drives claim → effect → finish for `keys` keys with `workers` concurrent clients against the
 * cluster's primary, kills it with SIGKILL once a third of the keys are acknowledged, promotes
 * the standby, and lets every client go on against it. Then it counts, on the promoted server,
 * the acknowledged answers that are gone, and retries every key once more as clients do when an
 * acknowledgement may have been lost, counting the handler runs for keys already acknowledged.
 */
export async function failoverRound(
  cluster: PgCluster,
  keys: number,
  workers = 8,
): Promise<FailoverCounts> {
  let current = connect(cluster.primary.url, workers);
  await applyPgMigrations(drizzle({ client: current.pool }));
  const acknowledged = new Set<string>();
  const runs = new Map<string, number>();
  let ranTwice = 0;
  let failedOperations = 0;
  let acknowledgedBeforeKill = 0;
  let failover: Promise<void> | undefined;
  const dead = current;

  const failOver = () => {
    failover ??= (async () => {
      acknowledgedBeforeKill = acknowledged.size;
      await cluster.primary.kill();
      await cluster.standby.promote();
      current = connect(cluster.standby.url, workers);
      await dead.pool.end().catch(() => undefined);
    })();
    return failover;
  };

  // One client's whole attempt at a key: settled once its answer is stored or replayed.
  const settle = async (key: string): Promise<void> => {
    for (;;) {
      const { store } = current;
      try {
        const now = seconds();
        const claim = await store.acquire(key, fingerprint, {
          expires: now + 3600,
          now,
          leaseSeconds: LEASE_SECONDS,
        });
        if (claim.status === 'done') return;
        if (claim.status === 'acquired') {
          runs.set(key, (runs.get(key) ?? 0) + 1);
          if (acknowledged.has(key)) ranTwice += 1;
          if (await store.finish(key, fingerprint, { key }, claim.fencingToken)) {
            acknowledged.add(key);
            if (!failover && acknowledged.size >= keys / 3) void failOver();
            return;
          }
        }
      } catch {
        // The primary is gone (or going): wait for the promoted standby and try the key again.
        failedOperations += 1;
        await failOver();
        continue;
      }
      // Another owner's lease is live (a claim made before the kill): wait for it to lapse.
      await pause(100);
    }
  };

  const queue = Array.from({ length: keys }, (_, index) => `key-${index}`);
  const drain = async (list: string[]) => {
    for (let key = list.shift(); key !== undefined; key = list.shift()) await settle(key);
  };
  await Promise.all(Array.from({ length: workers }, () => drain(queue)));
  await failover;

  const { rows } = await current.pool.query<{ id: string }>(
    "SELECT id FROM keys WHERE status = 'done'",
  );
  const stored = new Set(rows.map((row) => row.id));
  const lost = [...acknowledged].filter((key) => !stored.has(key)).length;

  const again = Array.from({ length: keys }, (_, index) => `key-${index}`);
  await Promise.all(Array.from({ length: workers }, () => drain(again)));
  const end = await current.pool.query<{ done: number }>(
    "SELECT count(*)::int AS done FROM keys WHERE status = 'done'",
  );
  await current.pool.end();
  return {
    acknowledgedBeforeKill,
    acknowledged: acknowledged.size,
    storedAtEnd: end.rows[0]?.done ?? 0,
    lost,
    ranTwice,
    failedOperations,
  };
}
