import { describe, expect, it } from 'vitest';
import {
  DEFAULT_BATCH_MILLIS,
  DEFAULT_BATCH_SIZE,
  MIN_TIMED_BATCH_SIZE,
  type SweepableStore,
  type SweepOptions,
  sweep,
} from '../../src/index.js';
import { openLibsqlStore } from '../../src/libsql/index.js';
import {
  openSqliteStore,
  openSqliteWorkerStore,
  SqliteGroupCommitStore,
} from '../../src/sqlite/index.js';
import { SWEEP_NOW, seedBacklog, tally } from '../support/backlog.js';
import { freshDbPath, tempDir } from '../support/temp.js';

const dir = tempDir('idem-sweep-budget-');

/**
 * A real SQLite store whose batches take, on a clock of its own, `cost(limit)` milliseconds: the
 * sweep reads that clock, so the time each batch "took" is set by the test, not by the machine.
 */
function timedStore(expired: number, cost: (limit: number, batch: number) => number) {
  const path = freshDbPath(dir);
  seedBacklog(path, { expired, pending: 3 });
  const store = openSqliteStore(path);
  let millis = 0;
  let calls = 0;
  const timed: SweepableStore = {
    sweepBatchMillis: store.sweepBatchMillis,
    stats: (now) => store.stats(now),
    sweepBatch: (now, limit) => {
      calls += 1;
      millis += cost(limit, calls);
      return store.sweepBatch(now, limit);
    },
  };
  return { path, store, timed, clock: () => millis };
}

async function limitsOf(timed: SweepableStore, options: SweepOptions) {
  const limits: number[] = [];
  const result = await sweep(timed, {
    ...options,
    onBatch: ({ batchSize }) => {
      limits.push(batchSize);
    },
  });
  return { limits, result };
}

describe('sweep sized by a time budget', () => {
  it('shrinks the next batch to what fits the default budget at the rate just measured', async () => {
    // 1/16 ms a row (exact in binary, so no rounding decides a size): 100 rows take 6.25 ms, and
    // 48 rows fit in the 3 ms budget.
    const { path, store, timed, clock } = timedStore(1_000, (limit) => limit * 0.0625);
    const { limits, result } = await limitsOf(timed, { now: SWEEP_NOW, clock });
    store.close();
    expect(DEFAULT_BATCH_MILLIS).toBe(3);
    expect(limits[0]).toBe(DEFAULT_BATCH_SIZE);
    expect(limits.slice(1)).toEqual(Array(19).fill(48));
    expect(result).toMatchObject({ deleted: 1_000, remaining: 0, stoppedBy: 'drained' });
    expect(tally(path)).toMatchObject({ expired: 0, pending: 3 });
  });

  it('reports what each batch took and shrinks at once after a slow one', async () => {
    // Batches 3 and 4 cost ten times as much per row, as under a burst of load.
    const perRow = (batch: number) => (batch === 3 || batch === 4 ? 0.625 : 0.0625);
    const { store, timed, clock } = timedStore(2_000, (limit, batch) => limit * perRow(batch));
    const seen: { batchSize: number; batchMillis: number }[] = [];
    await sweep(timed, {
      now: SWEEP_NOW,
      batchMillis: 6.25,
      clock,
      onBatch: ({ batchSize, batchMillis }) => {
        seen.push({ batchSize, batchMillis });
      },
    });
    store.close();
    expect(seen.slice(0, 6)).toEqual([
      { batchSize: 100, batchMillis: 6.25 },
      { batchSize: 100, batchMillis: 6.25 },
      { batchSize: 100, batchMillis: 62.5 },
      { batchSize: 10, batchMillis: 6.25 },
      // Fast again: it grows back, doubling at most per batch.
      { batchSize: 10, batchMillis: 0.625 },
      { batchSize: 20, batchMillis: 1.25 },
    ]);
    expect(seen.slice(6, 9).map((batch) => batch.batchSize)).toEqual([40, 80, 100]);
  });

  it('never exceeds a batchSize given with batchMillis, however fast its batches', async () => {
    const { store, timed, clock } = timedStore(3_000, () => 0);
    const { limits, result } = await limitsOf(timed, {
      now: SWEEP_NOW,
      batchSize: 100,
      batchMillis: 4,
      clock,
    });
    store.close();
    expect(limits.slice(0, 4)).toEqual([100, 100, 100, 100]);
    expect(result).toMatchObject({ deleted: 3_000, batches: 30 });
  });

  it('grows from the first batch of 100 without a batchSize, doubling at most', async () => {
    const { store, timed, clock } = timedStore(3_100, (limit) => limit * 0.001);
    const { limits } = await limitsOf(timed, { now: SWEEP_NOW, clock });
    store.close();
    expect(limits).toEqual([100, 200, 400, 800, 1_600]);
  });

  it('never shrinks below its floor when a batch costs more than the budget whatever its rows', async () => {
    const { store, timed, clock } = timedStore(200, () => 100);
    const { limits } = await limitsOf(timed, { now: SWEEP_NOW, clock });
    store.close();
    expect(limits[0]).toBe(100);
    expect(limits.slice(1)).toEqual(Array(10).fill(MIN_TIMED_BATCH_SIZE));
  });

  it('keeps a batchSize given alone fixed, however slow its batches', async () => {
    const { store, timed, clock } = timedStore(1_000, (limit) => limit * 10);
    const { limits } = await limitsOf(timed, { now: SWEEP_NOW, batchSize: 250, clock });
    store.close();
    expect(limits).toEqual([250, 250, 250, 250]);
  });

  it('keeps batches of 100 on a store that sets no budget, however slow its batches', async () => {
    // A store whose batch locks only its rows (PostgreSQL, MySQL) or whose time is a round trip
    // (D1, libSQL) leaves sweepBatchMillis unset: a writer of another key never waits for it.
    const { store, timed, clock } = timedStore(450, (limit) => limit * 10);
    const { limits } = await limitsOf(
      { ...timed, sweepBatchMillis: undefined },
      {
        now: SWEEP_NOW,
        clock,
      },
    );
    store.close();
    expect(limits).toEqual(Array(5).fill(DEFAULT_BATCH_SIZE));
  });

  it('is the default of the SQLite file stores, the group-commit and worker ones too, and of no other', async () => {
    const store = openSqliteStore(freshDbPath(dir));
    expect(store.sweepBatchMillis).toBe(DEFAULT_BATCH_MILLIS);
    const grouped = new SqliteGroupCommitStore(store);
    expect(grouped.sweepBatchMillis).toBe(DEFAULT_BATCH_MILLIS);
    await grouped.close();
    const worker = await openSqliteWorkerStore(freshDbPath(dir));
    expect(worker.sweepBatchMillis).toBe(DEFAULT_BATCH_MILLIS);
    await worker.close();
    const libsql = await openLibsqlStore(`file:${freshDbPath(dir)}`);
    const sweepable: SweepableStore = libsql;
    expect(sweepable.sweepBatchMillis).toBeUndefined();
    await libsql.close();
  });

  it('lets a batchSize under the floor stay the most rows a timed batch may have', async () => {
    const { store, timed, clock } = timedStore(30, () => 50);
    const { limits } = await limitsOf(timed, {
      now: SWEEP_NOW,
      batchSize: 4,
      batchMillis: 1,
      clock,
    });
    store.close();
    expect(limits).toEqual(Array(8).fill(4));
  });

  it('counts each batch at its largest limit on a dry run', async () => {
    const { store, timed } = timedStore(30_000, () => 0);
    expect(await sweep(timed, { now: SWEEP_NOW, maxBatches: 2, dryRun: true })).toMatchObject({
      wouldDelete: 20_000,
      remaining: 30_000,
    });
    expect(
      await sweep(timed, {
        now: SWEEP_NOW,
        maxBatches: 2,
        batchSize: 300,
        batchMillis: 2,
        dryRun: true,
      }),
    ).toMatchObject({ wouldDelete: 600 });
    expect(
      await sweep(timed, { now: SWEEP_NOW, maxBatches: 2, batchSize: 300, dryRun: true }),
    ).toMatchObject({ wouldDelete: 600 });
    store.close();
  });
});
