import type pg from 'pg';
import type { PgIdempotencyStore } from '../src/pg/index.js';
import {
  answerOfSize,
  type JsonObject,
  type RealisticKey,
  realisticKeys,
} from './support/inputs.js';
import { alternate, check, median, nowMs, pairedRatio } from './support/measure.js';
import { benchPool, createBenchDatabase } from './support/pg-database.js';
import type { BenchSize, GroupResult } from './support/report.js';
import { IN_FLIGHT, opsPerSecondConcurrent } from './support/server-ops.js';
import { shippedCore, shippedPg } from './support/shipped.js';

const { sweep } = shippedCore;
const { openPgStore } = shippedPg;

const SMALL_ROWS = 100_000;
// The expired backlog each purge round drains, the same in both tables: what grows is the table.
const BACKLOG = 1_000;
const PURGES_PER_ROUND = BACKLOG / 100;
const PURGE_NOW = 5_000;
// Rows of this share expire between PURGE_NOW and SWEEP_NOW: done and live while the operations
// and the purges run, the backlog of the sweep afterwards.
const LATER_SHARE = 0.1;
const SWEEP_NOW = 7_000;
const SWEEP_BATCH = 1_000;

type Store = PgIdempotencyStore<JsonObject>;

// Fills the store's table in one statement: `backlog` expired done rows, then `later` done rows
// expiring between PURGE_NOW and SWEEP_NOW, then live rows (one in ten pending) far in the future.
// UUID ids, so the kinds interleave in id order as real random keys do.
async function seed(pool: pg.Pool, schema: string, rows: number, backlog: number, later: number) {
  await pool.query(
    `INSERT INTO "${schema}".keys (id, fingerprint, status, response, expires)
     SELECT gen_random_uuid()::text, md5(i::text) || md5((i + 1)::text),
       CASE WHEN i > $2::int + $3::int AND i % 10 = 0 THEN 'pending' ELSE 'done' END,
       CASE WHEN i > $2::int + $3::int AND i % 10 = 0 THEN NULL ELSE '{"receipt":1}' END,
       CASE WHEN i <= $2::int THEN i * 1000.0 / $2::int
            WHEN i <= $2::int + $3::int THEN 6000 + (i - $2::int) * 1000.0 / nullif($3::int, 0)
            ELSE 1e9 + i END
     FROM generate_series(1, $1::int) AS i`,
    [rows, backlog, later],
  );
}

// Seeds a freshly migrated table: its indexes are dropped and built again from their own
// definitions around the insert (one sorted build each instead of millions of random inserts), so
// the table ends exactly as the migrations made it. Then VACUUM ANALYZE: statistics, hint bits and
// the visibility map a long-lived table has, and no autovacuum of the seed during the run.
async function seedTable(pool: pg.Pool, schema: string, rows: number) {
  const table = `"${schema}".keys`;
  const { rows: indexes } = await pool.query<{ name: string; definition: string }>(
    `SELECT i.relname AS name, pg_get_indexdef(i.oid) AS definition
     FROM pg_index x JOIN pg_class i ON i.oid = x.indexrelid
     WHERE x.indrelid = $1::regclass AND NOT x.indisprimary`,
    [table],
  );
  const { rows: keys } = await pool.query<{ name: string; definition: string }>(
    `SELECT conname AS name, pg_get_constraintdef(oid) AS definition
     FROM pg_constraint WHERE conrelid = $1::regclass AND contype = 'p'`,
    [table],
  );
  for (const { name } of indexes) await pool.query(`DROP INDEX "${schema}"."${name}"`);
  for (const { name } of keys) await pool.query(`ALTER TABLE ${table} DROP CONSTRAINT "${name}"`);
  await seed(pool, schema, rows, BACKLOG, Math.round(rows * LATER_SHARE));
  for (const { name, definition } of keys) {
    await pool.query(`ALTER TABLE ${table} ADD CONSTRAINT "${name}" ${definition}`);
  }
  for (const { definition } of indexes) await pool.query(definition);
  await pool.query(`VACUUM ANALYZE ${table}`);
}

// What the finishes of one table cost the server per operation: the share of them that were HOT
// updates (no index entry written), and the blocks they touched outside and inside shared buffers.
function finishCosts(
  prefix: string,
  before: TableState,
  after: TableState,
): Record<string, number> {
  const finishes = after.updates - before.updates;
  return {
    [`${prefix}.hotShare`]: (after.hotUpdates - before.hotUpdates) / finishes,
    [`${prefix}.blocksReadPerOp`]: (after.blocksRead - before.blocksRead) / finishes,
    [`${prefix}.blocksHitPerOp`]: (after.blocksHit - before.blocksHit) / finishes,
  };
}

// reserve, finish, then fetch of both stores, alternating, each round on fresh keys of its own;
// the finishes' row and block counters of each table are read around their phase.
async function compareStores(
  pool: pg.Pool,
  sides: { big: Store; small: Store; bigRows: number },
  rounds: number,
  count: number,
) {
  const { big, small, bigRows } = sides;
  const answers = Array.from({ length: count }, (_, i) => answerOfSize(1024, i));
  const keysOf = () => Array.from({ length: rounds }, () => realisticKeys(count));
  const inputs = { big: keysOf(), small: keysOf() };
  const input = (side: RealisticKey[][], round: number, index: number) =>
    side[round]?.[index] as RealisticKey;
  const side = (
    store: Store,
    keys: RealisticKey[][],
    op: (store: Store, key: RealisticKey, index: number) => Promise<void>,
  ) => {
    return (round: number) =>
      opsPerSecondConcurrent(count, (i) => op(store, input(keys, round, i), i));
  };
  const both = (op: (store: Store, key: RealisticKey, index: number) => Promise<void>) =>
    alternate(rounds, side(big, inputs.big, op), side(small, inputs.small, op));
  const reserve = await both(async (store, { key, fingerprint }) =>
    check(await store.reserve(key, fingerprint, 1e9), 'reserve'),
  );
  const operations = rounds * count;
  const seeded = { big: bigRows, small: SMALL_ROWS };
  const beforeFinish = {
    big: await settledState(pool, 'big', (c) => c.inserts >= seeded.big + operations),
    small: await settledState(pool, 'small', (c) => c.inserts >= seeded.small + operations),
  };
  const finish = await both(async (store, { key, fingerprint }, i) =>
    check(await store.finish(key, fingerprint, answers[i] as JsonObject), 'finish'),
  );
  const afterFinish = {
    big: await settledState(pool, 'big', (c) => c.updates >= beforeFinish.big.updates + operations),
    small: await settledState(
      pool,
      'small',
      (c) => c.updates >= beforeFinish.small.updates + operations,
    ),
  };
  const finishDetails = {
    ...finishCosts('pg.scale10M.finish.big', beforeFinish.big, afterFinish.big),
    ...finishCosts('pg.scale10M.finish.small', beforeFinish.small, afterFinish.small),
  };
  const fetch = await both(async (store, { key }) =>
    check((await store.fetch(key, 5)) !== null, 'fetch'),
  );
  return { reserve, finish, fetch, finishDetails };
}

// purge(100) of both stores, alternating: each round drains a backlog of BACKLOG rows, re-added
// (untimed) before every round but the first. A round's figure is the median of its purges.
async function comparePurges(pool: pg.Pool, big: Store, small: Store, rounds: number) {
  const all = { big: [] as number[], small: [] as number[] };
  const side = (store: Store, schema: 'big' | 'small') => async (round: number) => {
    if (round > 0) await seed(pool, schema, BACKLOG, BACKLOG, 0);
    const times: number[] = [];
    for (let i = 0; i < PURGES_PER_ROUND; i++) {
      const start = nowMs();
      const deleted = await store.purge(PURGE_NOW, 100);
      times.push(nowMs() - start);
      check(deleted.length === 100, 'pg purge');
    }
    all[schema].push(...times);
    return median(times);
  };
  const perRound = await alternate(rounds, side(big, 'big'), side(small, 'small'));
  return { perRound, all };
}

interface TableState {
  readonly tableBytes: number;
  readonly indexBytes: number;
  readonly deadTuples: number;
  readonly deletedTuples: number;
  readonly autovacuums: number;
  readonly lastAutovacuumAgo: number | null;
  readonly autovacuumThreshold: number;
  readonly inserts: number;
  readonly updates: number;
  readonly hotUpdates: number;
  /** The table's and its indexes' blocks read from outside shared buffers (OS cache or disk). */
  readonly blocksRead: number;
  /** The table's and its indexes' blocks found in shared buffers. */
  readonly blocksHit: number;
}

// What the server says of the table: its sizes, what autovacuum saw and did, and its cumulative
// row and block counters. The threshold is the dead-row count past which autovacuum would vacuum
// it (see the autovacuum settings).
async function tableState(pool: pg.Pool, schema: string): Promise<TableState> {
  const { rows } = await pool.query<Record<string, string | null>>(
    `SELECT pg_table_size(c.oid) AS table_bytes, pg_indexes_size(c.oid) AS index_bytes,
       s.n_dead_tup AS dead, s.n_tup_del AS deleted, s.autovacuum_count AS autovacuums,
       extract(epoch FROM now() - s.last_autovacuum) AS last_ago,
       current_setting('autovacuum_vacuum_threshold')::float8
         + current_setting('autovacuum_vacuum_scale_factor')::float8 * c.reltuples AS threshold,
       s.n_tup_ins AS inserts, s.n_tup_upd AS updates, s.n_tup_hot_upd AS hot,
       io.heap_blks_read + coalesce(io.idx_blks_read, 0) AS blocks_read,
       io.heap_blks_hit + coalesce(io.idx_blks_hit, 0) AS blocks_hit
     FROM pg_class c JOIN pg_stat_user_tables s ON s.relid = c.oid
       JOIN pg_statio_user_tables io ON io.relid = c.oid
     WHERE c.oid = $1::regclass`,
    [`"${schema}".keys`],
  );
  const row = rows[0] ?? {};
  const number = (name: string) => Number(row[name]);
  return {
    tableBytes: number('table_bytes'),
    indexBytes: number('index_bytes'),
    deadTuples: number('dead'),
    deletedTuples: number('deleted'),
    autovacuums: number('autovacuums'),
    lastAutovacuumAgo: row.last_ago == null ? null : number('last_ago'),
    autovacuumThreshold: number('threshold'),
    inserts: number('inserts'),
    updates: number('updates'),
    hotUpdates: number('hot'),
    blocksRead: number('blocks_read'),
    blocksHit: number('blocks_hit'),
  };
}

// The cumulative statistics reach the server some time after a transaction ends (each backend
// sends its own when idle): wait until the table's state shows `done` (the rows written so far),
// or give up after 20 seconds.
async function settledState(
  pool: pg.Pool,
  schema: string,
  done: (state: TableState) => boolean,
): Promise<TableState> {
  const deadline = nowMs() + 20_000;
  let state = await tableState(pool, schema);
  while (!done(state) && nowMs() < deadline) {
    await new Promise((resolve) => setTimeout(resolve, 250));
    state = await tableState(pool, schema);
  }
  return state;
}

function stateDetails(prefix: string, state: TableState): Record<string, number> {
  const mb = (bytes: number) => bytes / 2 ** 20;
  return {
    [`${prefix}.tableMB`]: mb(state.tableBytes),
    [`${prefix}.indexesMB`]: mb(state.indexBytes),
    [`${prefix}.deadTuples`]: state.deadTuples,
    [`${prefix}.autovacuumCount`]: state.autovacuums,
    ...(state.lastAutovacuumAgo === null
      ? {}
      : { [`${prefix}.lastAutovacuumSecondsAgo`]: state.lastAutovacuumAgo }),
  };
}

/**
 * The PostgreSQL store at scale: reserve, finish and fetch throughput (8 in flight on 8
 * connections) and purge(100) latency in a 10M-row table (1M with `--quick`) against a 100k-row
 * table in the same database, alternating; then a sweep of the big table's 1M expired rows (100k
 * with `--quick`), with the table's sizes and autovacuum's counters before and after. The seed is
 * one `INSERT … SELECT generate_series` per table and is not timed.
 */
export async function pgScale({ quick }: BenchSize): Promise<GroupResult> {
  const bigRows = quick ? 1_000_000 : 10_000_000;
  const rounds = quick ? 7 : 15;
  const purgeRounds = quick ? 5 : 9;
  const count = 2_000;
  const database = await createBenchDatabase('bench_scale');
  const pool = benchPool(database.url, IN_FLIGHT);
  const stores: Store[] = [];
  try {
    const big = await openPgStore<JsonObject>(pool, { schema: 'big' });
    stores.push(big);
    const small = await openPgStore<JsonObject>(pool, { schema: 'small' });
    stores.push(small);
    const seedStart = nowMs();
    await seedTable(pool, 'big', bigRows);
    await seedTable(pool, 'small', SMALL_ROWS);
    const seedSeconds = (nowMs() - seedStart) / 1000;
    const { reserve, finish, fetch, finishDetails } = await compareStores(
      pool,
      { big, small, bigRows },
      rounds,
      count,
    );
    const purge = await comparePurges(pool, big, small, purgeRounds);
    const before = await tableState(pool, 'big');
    const swept = await sweep(big, { now: SWEEP_NOW, batchSize: SWEEP_BATCH });
    const sweepRows = Math.round(bigRows * LATER_SHARE);
    check(swept.deleted === sweepRows && swept.stoppedBy === 'drained', 'pg sweep');
    const after = await settledState(
      pool,
      'big',
      (state) => state.deletedTuples >= before.deletedTuples + swept.deleted,
    );
    const { rows: settings } = await pool.query<{ name: string; setting: string }>(
      `SELECT name, setting FROM pg_settings
       WHERE name IN ('synchronous_commit', 'fsync', 'shared_buffers')`,
    );
    const sharedBuffers = settings.find((setting) => setting.name === 'shared_buffers');
    const durability = settings.filter((setting) => setting.name !== 'shared_buffers');
    check(
      durability.length === 2 && durability.every((setting) => setting.setting === 'on'),
      'pg durability (fsync and synchronous_commit on)',
    );
    return {
      metrics: {
        'pg.scale10M.reserve': pairedRatio({ ours: reserve.ours, theirs: reserve.theirs }),
        'pg.scale10M.finish': pairedRatio({ ours: finish.ours, theirs: finish.theirs }),
        'pg.scale10M.fetch': pairedRatio({ ours: fetch.ours, theirs: fetch.theirs }),
        'pg.scale10M.purge100': pairedRatio(purge.perRound),
      },
      details: {
        'pg.scale10M.rows.big': bigRows,
        'pg.scale10M.rows.small': SMALL_ROWS,
        'pg.scale10M.seedSeconds': seedSeconds,
        'pg.scale10M.reserve.opsPerSec.big': median(reserve.ours),
        'pg.scale10M.reserve.opsPerSec.small': median(reserve.theirs),
        'pg.scale10M.finish.opsPerSec.big': median(finish.ours),
        'pg.scale10M.finish.opsPerSec.small': median(finish.theirs),
        ...finishDetails,
        // pg_settings gives shared_buffers in blocks of 8 kB.
        'pg.scale10M.sharedBuffersMB': (Number(sharedBuffers?.setting) * 8) / 1024,
        'pg.scale10M.fetch.opsPerSec.big': median(fetch.ours),
        'pg.scale10M.fetch.opsPerSec.small': median(fetch.theirs),
        'pg.scale10M.purge100.ms.big': median(purge.all.big),
        'pg.scale10M.purge100.ms.small': median(purge.all.small),
        'pg.scale10M.sweep.rows': swept.deleted,
        'pg.scale10M.sweep.seconds': swept.seconds,
        'pg.scale10M.sweep.rowsPerSec': swept.deleted / swept.seconds,
        'pg.scale10M.sweep.batchSize': SWEEP_BATCH,
        'pg.scale10M.autovacuumThreshold': before.autovacuumThreshold,
        ...stateDetails('pg.scale10M.beforeSweep', before),
        ...stateDetails('pg.scale10M.afterSweep', after),
      },
    };
  } finally {
    for (const store of stores) await store.close();
    await pool.end();
    await database.drop();
  }
}
