import type { LeasedIdempotencyStore } from '../src/core/store.js';
import { startPgbouncer } from '../test/support/pgbouncer.js';
import {
  answerOfSize,
  type JsonObject,
  type RealisticKey,
  realisticKeys,
} from './support/inputs.js';
import { alternate, check, median, pairedRatio } from './support/measure.js';
import { benchPool, createBenchDatabase } from './support/pg-database.js';
import type { BenchSize, GroupResult } from './support/report.js';
import { IN_FLIGHT, opsPerSecondConcurrent } from './support/server-ops.js';
import { shippedPg } from './support/shipped.js';

const { openPgStore } = shippedPg;

type Store = LeasedIdempotencyStore<JsonObject>;

/**
 * reserve, then finish, then fetch of two stores on one table, each in `rounds` alternating pairs
 * of `count` operations ({@link IN_FLIGHT} at a time) on keys of its own, every write and read
 * checked. Returns each operation's ops/s per round of each side.
 */
async function compareStores(ours: Store, theirs: Store, rounds: number, count: number) {
  const answers = Array.from({ length: count }, (_, i) => answerOfSize(1024, i));
  const keysOf = () => Array.from({ length: rounds }, () => realisticKeys(count));
  const oursKeys = keysOf();
  const theirsKeys = keysOf();
  const side = (op: (store: Store, input: RealisticKey, index: number) => Promise<void>) =>
    alternate(
      rounds,
      (r) => opsPerSecondConcurrent(count, (i) => op(ours, oursKeys[r]?.[i] as RealisticKey, i)),
      (r) =>
        opsPerSecondConcurrent(count, (i) => op(theirs, theirsKeys[r]?.[i] as RealisticKey, i)),
    );
  const reserve = await side(async (store, { key, fingerprint }) => {
    check(await store.reserve(key, fingerprint, 1e9), 'reserve');
  });
  const finish = await side(async (store, { key, fingerprint }, i) => {
    check(await store.finish(key, fingerprint, answers[i] as JsonObject), 'finish');
  });
  const fetch = await side(async (store, { key }) => {
    check((await store.fetch(key, 5)) !== null, 'fetch');
  });
  return { reserve, finish, fetch };
}

/**
 * reserve, finish and fetch of the PostgreSQL store through a PgBouncer of the benchmark's own in
 * transaction pool mode, with `prepare: false` (unnamed statements, as a transaction pooler
 * needs), against the same store connected straight to the server with its named prepared
 * statements: one table in a database of the run's own, a node-postgres pool of 8 on each side,
 * PgBouncer with 8 server connections, 8 operations in flight, alternating. Both sides commit
 * every write on the server as it is configured (fsync and synchronous_commit on): the ratio is
 * the price of the pooler's hop and of parsing every statement again.
 */
export async function pgbouncerOps({ quick }: BenchSize): Promise<GroupResult> {
  const count = 1_000;
  const rounds = quick ? 7 : 25;
  const database = await createBenchDatabase('report_pgbouncer');
  const bouncer = await startPgbouncer(database.url, { poolSize: IN_FLIGHT });
  const directPool = benchPool(database.url, IN_FLIGHT);
  const bouncedPool = benchPool(bouncer.url, IN_FLIGHT);
  try {
    // Direct first: it applies the migrations; through PgBouncer the same check is then a read.
    const direct = await openPgStore<JsonObject>(directPool);
    const bounced = await openPgStore<JsonObject>(bouncedPool, { prepare: false });
    try {
      const { reserve, finish, fetch } = await compareStores(bounced, direct, rounds, count);
      return {
        metrics: {
          'pg.pgbouncer.reserve.vsDirect': pairedRatio(reserve),
          'pg.pgbouncer.finish.vsDirect': pairedRatio(finish),
          'pg.pgbouncer.fetch.vsDirect': pairedRatio(fetch),
        },
        details: {
          'pg.pgbouncer.reserve.opsPerSec.pgbouncer': median(reserve.ours),
          'pg.pgbouncer.reserve.opsPerSec.direct': median(reserve.theirs),
          'pg.pgbouncer.finish.opsPerSec.pgbouncer': median(finish.ours),
          'pg.pgbouncer.finish.opsPerSec.direct': median(finish.theirs),
          'pg.pgbouncer.fetch.opsPerSec.pgbouncer': median(fetch.ours),
          'pg.pgbouncer.fetch.opsPerSec.direct': median(fetch.theirs),
        },
      };
    } finally {
      await bounced.close();
      await direct.close();
    }
  } finally {
    await bouncedPool.end();
    await directPool.end();
    await bouncer.stop();
    await database.drop();
  }
}
