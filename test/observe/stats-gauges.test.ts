import { describe, expect, it } from 'vitest';
import { observeStoreStats } from '../../src/observe/index.js';
import { openSqliteStore } from '../../src/sqlite/index.js';
import { fixture, spawnTs } from '../support/child.js';
import { otelHarness } from '../support/otel.js';
import { freshDbPath, tempDir } from '../support/temp.js';
import { until } from '../support/waiting.js';

const dir = tempDir('idem-stats-gauges-');

async function gauge(harness: ReturnType<typeof otelHarness>, name: string): Promise<number> {
  const points = (await harness.metrics()).get(`idempotency.${name}`) ?? [];
  return points.reduce((sum, point) => sum + (point.value as number), 0);
}

describe('observeStoreStats', () => {
  it('moves the lapsed gauge once an owner is killed, within its lease; stale stays 0', async () => {
    const path = freshDbPath(dir);
    const store = openSqliteStore(path);
    const harness = otelHarness();
    const gauges = observeStoreStats(store, { meterProvider: harness.meterProvider });
    const owner = spawnTs(fixture('lease-owner.ts'), [path]);
    try {
      await until(() => store.get('order-1')?.status === 'pending', 20);
      expect(await gauge(harness, 'pending_keys')).toBe(1);
      expect(await gauge(harness, 'lapsed_pending_keys')).toBe(0);

      owner.child.kill('SIGKILL');
      expect((await owner.result).signal).toBe('SIGKILL');
      // The 2 s lease lapses without its renewals: the gauge the stuck-work alert watches moves,
      // while the stale gauge (rows past `expires`, a day away) would stay silent.
      await until(async () => (await gauge(harness, 'lapsed_pending_keys')) === 1, 100);
      expect(await gauge(harness, 'stale_pending_keys')).toBe(0);
      expect(await gauge(harness, 'unrecorded_keys')).toBe(0);
    } finally {
      owner.child.kill('SIGKILL');
      gauges.stop();
      await harness.shutdown();
      store.close();
    }
  }, 60_000);

  it('counts the keys marked unrecorded, which wait for a person', async () => {
    const store = openSqliteStore(freshDbPath(dir));
    const harness = otelHarness();
    const now = Date.now() / 1000;
    const gauges = observeStoreStats(store, { meterProvider: harness.meterProvider });
    const owned = store.acquire('k', 'fp', { now, expires: now + 3600, leaseSeconds: 30 });
    if (owned.status !== 'acquired') throw new Error('not acquired');
    store.markUnrecorded('k', 'fp', owned.fencingToken);
    expect(await gauge(harness, 'unrecorded_keys')).toBe(1);
    expect(await gauge(harness, 'lapsed_pending_keys')).toBe(0);
    gauges.stop();
    await harness.shutdown();
    store.close();
  });
});
