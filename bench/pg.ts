import { and, eq, gt, sql } from 'drizzle-orm';
import { drizzle } from 'drizzle-orm/node-postgres';
import pg from 'pg';
import { ownerRow } from '../src/core/key-conditions.js';
import { KeyStatus } from '../src/core/status.js';
import type { PgIdempotencyStore } from '../src/pg/index.js';
import { type JsonObject, type RealisticKey, realisticKeys } from './support/inputs.js';
import { alternate, check, median, nowMs, pairedRatio, ratioOfMedians } from './support/measure.js';
import type { BenchSize, GroupResult } from './support/report.js';
import {
  compareServerOperations,
  IN_FLIGHT,
  opsPerSecondConcurrent,
  rawSql,
} from './support/server-ops.js';
import { shippedPg } from './support/shipped.js';

const { openPgStore, pgKeysTable } = shippedPg;

const URL = 'postgres://postgres@127.0.0.1:5432/test';
const SEEDED_NOW = 5000;
const p = sql.placeholder;

// A named statement with exactly the text drizzle sends for the store's query.
function rawStatement(name: string, query: Parameters<typeof rawSql>[0]) {
  const { text, values } = rawSql(query);
  return (named: Record<string, unknown>) => ({ name, text, values: values(named) });
}

/**
 * reserve, finish and fetch of the PostgreSQL store against node-postgres sending the same SQL
 * text as named prepared statements, both on one pool of 8 connections to the real server with 8
 * operations in flight, alternating, on UUID keys, 64-hex digests and 1 KB answers; then purge(100)
 * latency with a large and a small expired backlog in tables of the same size.
 */
export async function pgOps({ quick }: BenchSize): Promise<GroupResult> {
  const count = 2_000;
  const rounds = quick ? 9 : 41;
  const schema = `bench_${process.pid}`;
  const pool = new pg.Pool({ connectionString: URL, max: IN_FLIGHT });
  const store = await openPgStore<JsonObject>(pool, { schema });
  const keys = pgKeysTable('keys', { schema });
  const db = drizzle({ client: pool });
  const raw = {
    reserve: rawStatement(
      'bench_raw_reserve',
      db
        .insert(keys)
        .values({
          id: p('id'),
          fingerprint: p('fingerprint'),
          status: KeyStatus.pending,
          expires: p('expires'),
        })
        .onConflictDoNothing()
        .returning({ id: keys.id }),
    ),
    finish: rawStatement(
      'bench_raw_finish',
      db
        .update(keys)
        .set({ status: KeyStatus.done, response: sql<string>`${p('response')}` })
        .where(ownerRow(keys, p('id'), p('fingerprint')))
        .returning({ id: keys.id }),
    ),
    fetch: rawStatement(
      'bench_raw_fetch',
      db
        .select({ response: keys.response })
        .from(keys)
        .where(
          and(eq(keys.id, p('id')), eq(keys.status, KeyStatus.done), gt(keys.expires, p('now'))),
        ),
    ),
  };
  try {
    const { reserve, finish, fetch } = await compareServerOperations(
      store,
      {
        reserve: async (key, fingerprint) =>
          (await pool.query(raw.reserve({ id: key, fingerprint: fingerprint, expires: 1e9 }))).rows
            .length,
        finish: async (key, fingerprint, response) =>
          (await pool.query(raw.finish({ id: key, fingerprint: fingerprint, response }))).rows
            .length,
        fetch: async (key, now) =>
          (
            (await pool.query(raw.fetch({ id: key, now }))).rows[0] as
              | { response: string | null }
              | undefined
          )?.response,
      },
      rounds,
      count,
    );
    // acquire (a reservation holding a 30 s lease) against reserve, on fresh keys of their own.
    const acquireKeys = Array.from({ length: rounds }, () => realisticKeys(count));
    const reserveKeys = Array.from({ length: rounds }, () => realisticKeys(count));
    const lease = await alternate(
      rounds,
      (r) =>
        opsPerSecondConcurrent(count, async (i) => {
          const { key, fingerprint } = (acquireKeys[r] as RealisticKey[])[i] as RealisticKey;
          const acquired = await store.acquire(key, fingerprint, {
            expires: 1e9,
            now: 5,
            leaseSeconds: 30,
          });
          check(acquired.status === 'acquired', 'acquire');
        }),
      (r) =>
        opsPerSecondConcurrent(count, async (i) => {
          const { key, fingerprint } = (reserveKeys[r] as RealisticKey[])[i] as RealisticKey;
          check(await store.reserve(key, fingerprint, 1e9), 'reserve');
        }),
    );
    const purge = await purgeBacklogs(pool, quick);
    return {
      metrics: {
        'pg.reserve.ratio': pairedRatio(reserve),
        'pg.finish.ratio': pairedRatio(finish),
        'pg.fetch.ratio': pairedRatio(fetch),
        'pg.purge100.backlogScale': ratioOfMedians(purge.large, purge.small),
        'pg.purge100.deleteFloorScale': ratioOfMedians(purge.deleteLarge, purge.deleteSmall),
        'pg.purge100.afterVacuumScale': ratioOfMedians(purge.vacuumed.large, purge.vacuumed.small),
        'pg.purge100.expiryOrderScale': ratioOfMedians(
          purge.expiryOrderLarge,
          purge.expiryOrderSmall,
        ),
        'pg.acquire.vsReserve': pairedRatio(lease),
      },
      details: {
        'pg.reserve.opsPerSec.store': median(reserve.ours),
        'pg.reserve.opsPerSec.raw': median(reserve.theirs),
        'pg.finish.opsPerSec.store': median(finish.ours),
        'pg.finish.opsPerSec.raw': median(finish.theirs),
        'pg.fetch.opsPerSec.store': median(fetch.ours),
        'pg.fetch.opsPerSec.raw': median(fetch.theirs),
        'pg.acquire.opsPerSec': median(lease.ours),
        'pg.acquire.opsPerSec.reserve': median(lease.theirs),
        'pg.purge100.ms.smallBacklog': median(purge.small),
        'pg.purge100.ms.largeBacklog': median(purge.large),
        'pg.purge100.ms.plainDelete.smallBacklog': median(purge.deleteSmall),
        'pg.purge100.ms.plainDelete.largeBacklog': median(purge.deleteLarge),
        'pg.purge100.ms.expiryOrder.smallBacklog': median(purge.expiryOrderSmall),
        'pg.purge100.ms.expiryOrder.largeBacklog': median(purge.expiryOrderLarge),
        'pg.purge100.ms.afterVacuum.smallBacklog': median(purge.vacuumed.small),
        'pg.purge100.ms.afterVacuum.largeBacklog': median(purge.vacuumed.large),
        'pg.purge100.idWalkEntries.smallBacklog': purge.walks[0] ?? 0,
        'pg.purge100.idWalkEntries.largeBacklog': purge.walks[1] ?? 0,
        'pg.purge100.tableRows': purge.rows,
        'pg.purge100.backlog.small': purge.backlogs[0],
        'pg.purge100.backlog.large': purge.backlogs[1],
      },
    };
  } finally {
    await store.close();
    await pool.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
    await pool.end();
  }
}

// Adds `count` rows to the store's table in one statement: `expired` done rows with deadlines
// rising in insertion order up to 1000, or live rows (one in ten pending) far in the future. UUID
// ids, so expired and live rows interleave in id order as real random keys do.
async function seedPg(pool: pg.Pool, schema: string, count: number, kind: 'expired' | 'live') {
  const status =
    kind === 'expired' ? "'done'" : "CASE WHEN i % 10 = 0 THEN 'pending' ELSE 'done' END";
  const response =
    kind === 'expired'
      ? `'{"receipt":1}'`
      : `CASE WHEN i % 10 = 0 THEN NULL ELSE '{"receipt":1}' END`;
  const expires = kind === 'expired' ? `i * 1000.0 / ${count}` : '1e9 + i';
  await pool.query(
    `INSERT INTO "${schema}".keys (id, fingerprint, status, response, expires)
     SELECT gen_random_uuid()::text, md5(i::text) || md5((i + 1)::text), ${status}, ${response}, ${expires}
     FROM generate_series(1, $1::int) AS i`,
    [count],
  );
}

// Done rows whose id is at most the 100th lowest expired one: the index entries the id-order
// walk of the done rows passes to find one purge's candidates. A purge takes the lowest expired
// ids, so purges thin out the expired rows at the low end of the ids, and the walk grows longer.
async function idWalkLength(pool: pg.Pool, schema: string): Promise<number> {
  const { rows } = await pool.query<{ count: number }>(
    `SELECT count(*)::int AS count FROM "${schema}".keys
     WHERE status = 'done' AND id <= (
       SELECT max(id) FROM (
         SELECT id FROM "${schema}".keys WHERE status = 'done' AND expires <= $1
         ORDER BY id LIMIT 100) AS candidates)`,
    [SEEDED_NOW],
  );
  return rows[0]?.count ?? 0;
}

/**
 * purge(100) latency with a small and a large expired backlog, each in a table of the same total
 * size, alternating; each round re-adds the rows the previous round's purges removed. Beside each
 * purge, a plain DELETE of 100 ids of the same backlog: what deleting those rows costs by itself,
 * and 100 rows taken in expiry order; after the rounds, the id walk's length and the purges again
 * after a VACUUM.
 */
async function purgeBacklogs(pool: pg.Pool, quick: boolean) {
  const rows = quick ? 200_000 : 1_000_000;
  const backlogs = quick ? ([1_000, 20_000] as const) : ([1_000, 100_000] as const);
  const rounds = quick ? 5 : 9;
  const purgesPerRound = 10;
  const stores: PgIdempotencyStore<unknown>[] = [];
  const schemas = backlogs.map((_, i) => `bench_purge_${process.pid}_${i}`);
  try {
    for (const [i, backlog] of backlogs.entries()) {
      const schema = schemas[i] as string;
      stores.push(await openPgStore(pool, { schema }));
      await seedPg(pool, schema, rows - backlog, 'live');
      await seedPg(pool, schema, backlog, 'expired');
      await pool.query(`VACUUM ANALYZE "${schema}".keys`);
    }
    const times = {
      small: [] as number[],
      large: [] as number[],
      deleteSmall: [] as number[],
      deleteLarge: [] as number[],
      expiryOrderSmall: [] as number[],
      expiryOrderLarge: [] as number[],
    };
    // A round's purges of one side, each timed into `into` and checked to delete 100 rows.
    const timePurges = async (store: PgIdempotencyStore<unknown>, into: number[]) => {
      for (let i = 0; i < purgesPerRound; i++) {
        const start = nowMs();
        const deleted = await store.purge(SEEDED_NOW, 100);
        into.push(nowMs() - start);
        check(deleted.length === 100, 'pg purge');
      }
    };
    const side = (index: 0 | 1) => async (round: number) => {
      const store = stores[index] as PgIdempotencyStore<unknown>;
      const schema = schemas[index] as string;
      if (round > 0) await seedPg(pool, schema, purgesPerRound * 100, 'expired');
      await timePurges(store, index === 0 ? times.small : times.large);
      // The floor: the same kind of 100 ids (the store picks them, untimed) deleted by one plain
      // statement, on rows of their own so the purges above keep their backlog.
      await seedPg(pool, schema, purgesPerRound * 100, 'expired');
      for (let i = 0; i < purgesPerRound; i++) {
        const ids = await store.expired(SEEDED_NOW, 100);
        const start = nowMs();
        const { rowCount } = await pool.query(
          `DELETE FROM "${schema}".keys WHERE id = ANY($1::text[])`,
          [ids],
        );
        (index === 0 ? times.deleteSmall : times.deleteLarge).push(nowMs() - start);
        check(rowCount === 100, 'pg plain delete');
      }
      // The design `purge` cannot use: 100 rows taken in expiry order, `(expires, id)`, as a
      // sweep batch takes them. Its rows are the earliest deadlines, not the lowest ids that
      // `purge` promises, so it is measured beside the purge, on rows of its own.
      await seedPg(pool, schema, purgesPerRound * 100, 'expired');
      for (let i = 0; i < purgesPerRound; i++) {
        const start = nowMs();
        const deleted = await store.sweepBatch(SEEDED_NOW, 100);
        (index === 0 ? times.expiryOrderSmall : times.expiryOrderLarge).push(nowMs() - start);
        check(deleted === 100, 'pg expiry-order batch');
      }
      return 0;
    };
    await alternate(rounds, side(0), side(1));
    const walks = await Promise.all(schemas.map((schema) => idWalkLength(pool, schema)));
    // The same purges once VACUUM (untimed) has removed the index entries of the rows deleted so
    // far: what the dead entries cost the walk. Autovacuum would not have come yet (its
    // threshold is a fifth of the table).
    const vacuumed = { small: [] as number[], large: [] as number[] };
    const vacuumedSide = (index: 0 | 1) => async () => {
      const store = stores[index] as PgIdempotencyStore<unknown>;
      const schema = schemas[index] as string;
      await seedPg(pool, schema, purgesPerRound * 100, 'expired');
      await pool.query(`VACUUM "${schema}".keys`);
      await timePurges(store, index === 0 ? vacuumed.small : vacuumed.large);
      return 0;
    };
    await alternate(3, vacuumedSide(0), vacuumedSide(1));
    return { ...times, rows, backlogs, walks, vacuumed };
  } finally {
    for (const store of stores) await store.close();
    for (const schema of schemas) await pool.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
  }
}
