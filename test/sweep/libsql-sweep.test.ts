import Database from 'better-sqlite3';
import { describe, expect, it } from 'vitest';
import { InvalidOptionError, sweep } from '../../src/index.js';
import { openLibsqlStore } from '../../src/libsql/index.js';
import { integrity, SWEEP_NOW, seedBacklog, tally } from '../support/backlog.js';
import { fileUrl } from '../support/libsql-harness.js';
import { freshDbPath, tempDir } from '../support/temp.js';

const dir = tempDir('idem-libsql-sweep-');

async function withSeededStore(backlog: Parameters<typeof seedBacklog>[1]) {
  const path = freshDbPath(dir);
  seedBacklog(path, backlog);
  return { path, store: await openLibsqlStore(fileUrl(path)) };
}

// The expired ids in the order a sweep must take them: the retention index's (expires, id).
function expiredInIndexOrder(path: string): string[] {
  const client = new Database(path, { readonly: true });
  try {
    return client
      .prepare("SELECT id FROM keys WHERE status = 'done' AND expires <= ? ORDER BY expires, id")
      .pluck()
      .all(SWEEP_NOW) as string[];
  } finally {
    client.close();
  }
}

describe('sweep on a libSQL store', () => {
  it('deletes 5,000 expired answers among 8,000 rows, keeping pending and live rows', async () => {
    const kept = { live: 1_000, pending: 1_000, stalePending: 1_000 };
    const { path, store } = await withSeededStore({ expired: 5_000, ...kept });
    const batches: number[] = [];
    const result = await sweep(store, {
      now: SWEEP_NOW,
      batchSize: 250,
      onBatch: ({ batchDeleted }) => {
        batches.push(batchDeleted);
      },
    });
    await store.close();
    expect(result).toMatchObject({
      deleted: 5_000,
      batches: 20,
      remaining: 0,
      backlog: 5_000,
      stoppedBy: 'drained',
    });
    expect(batches).toEqual(Array(20).fill(250));
    expect(tally(path)).toEqual({ expired: 0, ...kept });
    expect(integrity(path)).toBe('ok');
  });

  it('takes each batch in index order (expires, id), not in id order', async () => {
    const { path, store } = await withSeededStore({ expired: 300, stalePending: 20 });
    const order = expiredInIndexOrder(path);
    // The seed scatters the deadlines, so the two orders really differ.
    expect(order).not.toEqual([...order].sort());
    expect(await store.sweepBatch(SWEEP_NOW, 40)).toBe(40);
    expect(expiredInIndexOrder(path)).toEqual(order.slice(40));
    await store.close();
  });

  it('stops on maxBatches, then on an aborted signal, with what is left', async () => {
    const { path, store } = await withSeededStore({ expired: 100, stalePending: 7 });
    expect(await sweep(store, { now: SWEEP_NOW, batchSize: 15, maxBatches: 2 })).toMatchObject({
      deleted: 30,
      batches: 2,
      remaining: 70,
      stoppedBy: 'maxBatches',
    });
    const controller = new AbortController();
    const aborted = await sweep(store, {
      now: SWEEP_NOW,
      batchSize: 10,
      signal: controller.signal,
      onBatch: ({ batches }) => {
        if (batches === 3) controller.abort();
      },
    });
    await store.close();
    expect(aborted).toMatchObject({ deleted: 30, batches: 3, remaining: 40, stoppedBy: 'signal' });
    expect(tally(path)).toEqual({ expired: 40, live: 0, pending: 0, stalePending: 7 });
  });

  it('deletes nothing on a dry run, and refuses a bad batch size before touching rows', async () => {
    const { path, store } = await withSeededStore({ expired: 95, pending: 4 });
    expect(await sweep(store, { now: SWEEP_NOW, dryRun: true })).toMatchObject({
      deleted: 0,
      remaining: 95,
      stoppedBy: 'dryRun',
      wouldDelete: 95,
    });
    await expect(sweep(store, { now: SWEEP_NOW, batchSize: 0 })).rejects.toBeInstanceOf(
      InvalidOptionError,
    );
    await expect(store.sweepBatch(SWEEP_NOW, 10_001)).rejects.toBeInstanceOf(InvalidOptionError);
    await store.close();
    expect(tally(path)).toEqual({ expired: 95, live: 0, pending: 4, stalePending: 0 });
  });

  it('lets reserves of the same process run between batches without stalling', async () => {
    const { path, store } = await withSeededStore({ expired: 2_000, pending: 10 });
    // The client has several connections; a transaction held open across an await would make a
    // reserve on another connection wait for the lock synchronously, stalling the sweep itself.
    const [result, reserved] = await Promise.all([
      sweep(store, { now: SWEEP_NOW, batchSize: 50 }),
      Promise.all(Array.from({ length: 200 }, (_, i) => store.reserve(`new-${i}`, 'd', 2_000))),
    ]);
    await store.close();
    expect(result).toMatchObject({ deleted: 2_000, remaining: 0, stoppedBy: 'drained' });
    expect(reserved.every(Boolean)).toBe(true);
    expect(tally(path)).toEqual({ expired: 0, live: 0, pending: 210, stalePending: 0 });
  });
});
