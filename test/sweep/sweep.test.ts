import { describe, expect, it } from 'vitest';
import {
  InvalidOptionError,
  InvalidTimeError,
  type SweepOptions,
  type SweepProgress,
  sweep,
} from '../../src/index.js';
import { openSqliteStore } from '../../src/sqlite/index.js';
import { SWEEP_NOW, seedBacklog, tally } from '../support/backlog.js';
import { freshDbPath, tempDir } from '../support/temp.js';

const dir = tempDir('idem-sweep-');

function withSeededStore(backlog: Parameters<typeof seedBacklog>[1]) {
  const path = freshDbPath(dir);
  seedBacklog(path, backlog);
  return { path, store: openSqliteStore(path) };
}

describe('sweep', () => {
  it('deletes 10,000 expired answers among 20,000 rows, keeping pending and live rows', async () => {
    const { path, store } = withSeededStore({
      expired: 10_000,
      live: 4_000,
      pending: 3_000,
      stalePending: 3_000,
    });
    const seen: SweepProgress[] = [];
    const result = await sweep(store, {
      now: SWEEP_NOW,
      batchSize: 250,
      onBatch: (progress) => {
        seen.push(progress);
      },
    });
    store.close();

    expect(result).toMatchObject({
      deleted: 10_000,
      batches: 40,
      remaining: 0,
      backlog: 10_000,
      stoppedBy: 'drained',
      wouldDelete: 0,
    });
    expect(result.seconds).toBeGreaterThan(0);
    expect(tally(path)).toEqual({ expired: 0, live: 4_000, pending: 3_000, stalePending: 3_000 });
    expect(seen).toHaveLength(40);
    expect(seen.map((progress) => progress.batchDeleted)).toEqual(Array(40).fill(250));
    expect(seen.at(-1)).toMatchObject({ deleted: 10_000, batches: 40, backlog: 10_000 });
  });

  it('ends on a short batch, counting only batches that deleted rows', async () => {
    const { path, store } = withSeededStore({ expired: 25, stalePending: 5 });
    const result = await sweep(store, { now: SWEEP_NOW, batchSize: 10 });
    store.close();
    expect(result).toMatchObject({ deleted: 25, batches: 3, remaining: 0, stoppedBy: 'drained' });
    expect(tally(path)).toEqual({ expired: 0, live: 0, pending: 0, stalePending: 5 });
  });

  it('starts with a batch of 100 by default and reports an empty backlog as drained', async () => {
    const { store } = withSeededStore({ expired: 250 });
    const limits: number[] = [];
    const result = await sweep(store, {
      now: SWEEP_NOW,
      onBatch: ({ batchSize }) => {
        limits.push(batchSize);
      },
    });
    expect(result).toMatchObject({ deleted: 250, remaining: 0, stoppedBy: 'drained' });
    expect(limits[0]).toBe(100);
    expect(await sweep(store, { now: SWEEP_NOW })).toMatchObject({
      deleted: 0,
      batches: 0,
      remaining: 0,
      backlog: 0,
      stoppedBy: 'drained',
    });
    store.close();
  });

  it('stops after maxBatches and reports the backlog left', async () => {
    const { path, store } = withSeededStore({ expired: 100, live: 3 });
    const result = await sweep(store, { now: SWEEP_NOW, batchSize: 7, maxBatches: 4 });
    store.close();
    expect(result).toMatchObject({
      deleted: 28,
      batches: 4,
      remaining: 72,
      backlog: 100,
      stoppedBy: 'maxBatches',
    });
    expect(tally(path).expired).toBe(72);
  });

  it('starts no new batch once maxSeconds has passed', async () => {
    const { store } = withSeededStore({ expired: 100 });
    // Any real batch takes longer than a nanosecond, so exactly one batch runs.
    const result = await sweep(store, { now: SWEEP_NOW, batchSize: 10, maxSeconds: 1e-9 });
    store.close();
    expect(result).toMatchObject({
      deleted: 10,
      batches: 1,
      remaining: 90,
      stoppedBy: 'maxSeconds',
    });
  });

  it('stops between batches when its signal is aborted', async () => {
    const { path, store } = withSeededStore({ expired: 100 });
    const controller = new AbortController();
    const result = await sweep(store, {
      now: SWEEP_NOW,
      batchSize: 10,
      signal: controller.signal,
      onBatch: ({ batches }) => {
        if (batches === 3) controller.abort();
      },
    });
    expect(result).toMatchObject({ deleted: 30, batches: 3, remaining: 70, stoppedBy: 'signal' });
    expect(tally(path).expired).toBe(70);

    const before = await sweep(store, { now: SWEEP_NOW, signal: AbortSignal.abort() });
    store.close();
    expect(before).toMatchObject({ deleted: 0, batches: 0, remaining: 70, stoppedBy: 'signal' });
  });

  it('lets an abort timer fire between batches of a synchronous store', async () => {
    const { store } = withSeededStore({ expired: 1_000 });
    const controller = new AbortController();
    // Aborted from a macrotask queued before the sweep's own yield: only a sweep that yields to
    // the event loop between batches sees it, and then right after the first batch.
    const result = await sweep(store, {
      now: SWEEP_NOW,
      batchSize: 1,
      signal: controller.signal,
      onBatch: ({ batches }) => {
        if (batches === 1) setImmediate(() => controller.abort());
      },
    });
    store.close();
    expect(result).toMatchObject({ deleted: 1, batches: 1, remaining: 999, stoppedBy: 'signal' });
  });

  it('deletes nothing on a dry run and reports what a sweep would delete', async () => {
    const { path, store } = withSeededStore({ expired: 95, pending: 4, stalePending: 2 });
    expect(await sweep(store, { now: SWEEP_NOW, dryRun: true })).toMatchObject({
      deleted: 0,
      batches: 0,
      remaining: 95,
      backlog: 95,
      stoppedBy: 'dryRun',
      wouldDelete: 95,
    });
    expect(
      await sweep(store, { now: SWEEP_NOW, batchSize: 20, maxBatches: 2, dryRun: true }),
    ).toMatchObject({ wouldDelete: 40, remaining: 95 });
    store.close();
    expect(tally(path)).toEqual({ expired: 95, live: 0, pending: 4, stalePending: 2 });
  });

  it('refuses bad options with a typed error before touching the store', async () => {
    const { path, store } = withSeededStore({ expired: 5 });
    const bad: [Partial<SweepOptions> | null, typeof InvalidOptionError][] = [
      [null, InvalidOptionError],
      [{}, InvalidTimeError],
      [{ now: Number.NaN }, InvalidTimeError],
      [{ now: SWEEP_NOW, batchSize: 0 }, InvalidOptionError],
      [{ now: SWEEP_NOW, batchSize: 10_001 }, InvalidOptionError],
      [{ now: SWEEP_NOW, batchSize: 2.5 }, InvalidOptionError],
      [{ now: SWEEP_NOW, maxBatches: 0 }, InvalidOptionError],
      [{ now: SWEEP_NOW, maxSeconds: 0 }, InvalidOptionError],
      [{ now: SWEEP_NOW, maxSeconds: Number.POSITIVE_INFINITY }, InvalidOptionError],
      [{ now: SWEEP_NOW, dryRun: 'yes' as unknown as boolean }, InvalidOptionError],
      [{ now: SWEEP_NOW, signal: {} as AbortSignal }, InvalidOptionError],
      [{ now: SWEEP_NOW, onBatch: 1 as unknown as () => void }, InvalidOptionError],
      [{ now: SWEEP_NOW, batchMillis: 0 }, InvalidOptionError],
      [{ now: SWEEP_NOW, batchMillis: -1 }, InvalidOptionError],
      [{ now: SWEEP_NOW, batchMillis: Number.NaN }, InvalidOptionError],
      [{ now: SWEEP_NOW, batchMillis: Number.POSITIVE_INFINITY }, InvalidOptionError],
      [{ now: SWEEP_NOW, batchMillis: 60_001 }, InvalidOptionError],
      [{ now: SWEEP_NOW, batchMillis: '3' as unknown as number }, InvalidOptionError],
      [{ now: SWEEP_NOW, clock: 0 as unknown as () => number }, InvalidOptionError],
    ];
    for (const [options, type] of bad) {
      await expect(sweep(store, options as SweepOptions)).rejects.toBeInstanceOf(type);
    }
    store.close();
    expect(tally(path).expired).toBe(5);
  });

  it('passes an error of onBatch on, keeping the batches already committed', async () => {
    const { path, store } = withSeededStore({ expired: 50 });
    const failure = new Error('progress sink failed');
    await expect(
      sweep(store, {
        now: SWEEP_NOW,
        batchSize: 10,
        onBatch: ({ batches }) => {
          if (batches === 2) throw failure;
        },
      }),
    ).rejects.toBe(failure);
    store.close();
    expect(tally(path).expired).toBe(30);
  });
});
