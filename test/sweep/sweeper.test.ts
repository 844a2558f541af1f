import { describe, expect, it } from 'vitest';
import {
  InvalidOptionError,
  SWEEPER_LEASE_FINGERPRINT,
  SWEEPER_LEASE_KEY,
  startSweeper,
} from '../../src/index.js';
import { openSqliteStore } from '../../src/sqlite/index.js';
import { freshDbPath, tempDir } from '../support/temp.js';
import { deferred, until } from '../support/waiting.js';

const dir = tempDir('idem-sweeper-unit-');
const NOW = 1_000;

function storeWithExpired(rows: number) {
  const store = openSqliteStore(freshDbPath(dir));
  for (let i = 0; i < rows; i++) {
    store.reserve(`k${i}`, 'fp', NOW - 1);
    store.finish(`k${i}`, 'fp', i);
  }
  return store;
}

describe('startSweeper', () => {
  it('sweeps on its schedule until stopped, then gives the lease back', async () => {
    const store = storeWithExpired(30);
    const sweeps: number[] = [];
    const sweeper = startSweeper(store, {
      intervalSeconds: 0.01,
      now: () => NOW,
      batchSize: 10,
      onSweep: (result) => {
        sweeps.push(result.deleted);
      },
    });
    await until(() => sweeps.length >= 2);
    await sweeper.stop();
    expect(sweeper.stopped).toBe(true);
    expect(sweeps[0]).toBe(30);
    expect(store.stats(NOW).expired).toBe(0);
    expect(store.get(SWEEPER_LEASE_KEY)).toBeNull();
    store.close();
  });

  it('stop() waits for the batch in flight, and no batch starts after it', async () => {
    const store = storeWithExpired(30);
    const inBatch = deferred();
    const release = deferred();
    let batches = 0;
    const sweeper = startSweeper(store, {
      intervalSeconds: 0.01,
      now: () => NOW,
      batchSize: 10,
      onBatch: async () => {
        batches++;
        inBatch.resolve();
        await release.promise;
      },
    });
    await inBatch.promise;
    let stopped = false;
    const stopping = sweeper.stop().then(() => {
      stopped = true;
    });
    await new Promise((resolve) => setImmediate(resolve));
    expect(stopped).toBe(false);
    release.resolve();
    await stopping;
    expect(batches).toBe(1);
    expect(store.stats(NOW).expired).toBe(20);
    expect(store.get(SWEEPER_LEASE_KEY)).toBeNull();
    store.close();
  });

  it('skips a sweep silently while another holds the lease', async () => {
    const store = storeWithExpired(5);
    const held = store.acquire(SWEEPER_LEASE_KEY, SWEEPER_LEASE_FINGERPRINT, {
      now: NOW,
      expires: NOW + 60,
      leaseSeconds: 60,
    });
    expect(held.status).toBe('acquired');
    const errors: unknown[] = [];
    let attempts = 0;
    const sweeper = startSweeper(store, {
      intervalSeconds: 0.01,
      now: () => {
        attempts++;
        return NOW;
      },
      onError: (error) => errors.push(error),
    });
    await until(() => attempts >= 3);
    await sweeper.stop();
    expect(errors).toEqual([]);
    expect(store.stats(NOW).expired).toBe(5);
    store.close();
  });

  it('reports a failing sweep to onError and carries on', async () => {
    const store = storeWithExpired(5);
    const errors: unknown[] = [];
    let calls = 0;
    const sweeper = startSweeper(store, {
      intervalSeconds: 0.01,
      now: () => NOW,
      batchSize: 1,
      onBatch: () => {
        calls++;
        if (calls === 1) throw new Error('onBatch failed');
      },
      onError: (error) => errors.push(error),
    });
    await until(() => store.stats(NOW).expired === 0);
    await sweeper.stop();
    expect(errors).toHaveLength(1);
    expect(String(errors[0])).toContain('onBatch failed');
    expect(store.get(SWEEPER_LEASE_KEY)).toBeNull();
    store.close();
  });

  it('stops when the store is closed, and on its signal', async () => {
    const closing = openSqliteStore(freshDbPath(dir));
    const errors: unknown[] = [];
    const first = startSweeper(closing, {
      intervalSeconds: 0.01,
      onError: (error) => errors.push(error),
    });
    closing.close();
    await until(() => first.stopped);
    expect(errors).toEqual([]);

    const store = openSqliteStore(freshDbPath(dir));
    const controller = new AbortController();
    const second = startSweeper(store, { intervalSeconds: 0.01, signal: controller.signal });
    controller.abort();
    await until(() => second.stopped);
    store.close();
  });

  it('refuses bad options before starting', () => {
    const store = openSqliteStore(freshDbPath(dir));
    expect(() => startSweeper(store, { intervalSeconds: 0 })).toThrow(InvalidOptionError);
    expect(() => startSweeper(store, { leaseSeconds: Number.NaN })).toThrow(InvalidOptionError);
    expect(() => startSweeper(store, { batchSize: 0 })).toThrow(InvalidOptionError);
    store.close();
  });
});
