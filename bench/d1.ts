import { fileURLToPath } from 'node:url';
import { Miniflare } from 'miniflare';
import { bundleWorker } from '../test/support/worker-bundle.js';
import type { D1Block } from './d1-worker.js';
import { type RealisticKey, realisticKeys } from './support/inputs.js';
import { alternate, median, pairedRatio } from './support/measure.js';
import type { BenchSize, GroupResult } from './support/report.js';
import { benchDir } from './support/sqlite-files.js';

const WORKER = fileURLToPath(new URL('./d1-worker.ts', import.meta.url));

/**
 * reserve, finish and fetch of the D1 store against the same SQL text prepared once and bound per
 * call on the binding, inside workerd (Miniflare) with a D1 database kept in a temporary
 * directory, 8 operations in flight, alternating, on UUID keys, 64-hex digests and 1 KB answers.
 * Each block is timed inside the Worker (see bench/d1-worker.ts), so the request from Node that
 * starts it is not counted on either side; every D1 call of both sides goes through the same
 * binding to Miniflare's local D1, which is SQLite in workerd, not Cloudflare's network service.
 */
export async function d1Ops({ quick }: BenchSize): Promise<GroupResult> {
  const count = 300;
  const rounds = quick ? 5 : 21;
  const { dir, cleanup } = benchDir();
  const mf = new Miniflare({
    modules: true,
    script: await bundleWorker(WORKER),
    compatibilityDate: '2026-04-01',
    compatibilityFlags: ['nodejs_compat'],
    d1Databases: ['DB'],
    d1Persist: dir,
  });
  const post = async (path: string, body: unknown) => {
    const response = await mf.dispatchFetch(`http://worker${path}`, {
      method: 'POST',
      body: JSON.stringify(body),
    });
    const text = await response.text();
    if (response.status !== 200) throw new Error(`${path} answered ${response.status}: ${text}`);
    return JSON.parse(text) as { opsPerSec: number };
  };
  try {
    await post('/migrate', {});
    const keysOf = () => Array.from({ length: rounds }, () => realisticKeys(count));
    const inputs = { store: keysOf(), raw: keysOf() };
    const block = (side: D1Block['side'], op: D1Block['op']) => async (round: number) => {
      const keys = inputs[side][round] as RealisticKey[];
      return (await post('/block', { side, op, keys } satisfies D1Block)).opsPerSec;
    };
    const compare = (op: D1Block['op']) => alternate(rounds, block('store', op), block('raw', op));
    const reserve = await compare('reserve');
    const finish = await compare('finish');
    const fetch = await compare('fetch');
    return {
      metrics: {
        'd1.reserve.ratio': pairedRatio(reserve),
        'd1.finish.ratio': pairedRatio(finish),
        'd1.fetch.ratio': pairedRatio(fetch),
      },
      details: {
        'd1.reserve.opsPerSec.store': median(reserve.ours),
        'd1.reserve.opsPerSec.raw': median(reserve.theirs),
        'd1.finish.opsPerSec.store': median(finish.ours),
        'd1.finish.opsPerSec.raw': median(finish.theirs),
        'd1.fetch.opsPerSec.store': median(fetch.ours),
        'd1.fetch.opsPerSec.raw': median(fetch.theirs),
      },
    };
  } finally {
    await mf.dispose();
    cleanup();
  }
}
