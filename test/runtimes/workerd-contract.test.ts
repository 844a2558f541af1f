import { fileURLToPath } from 'node:url';
import { Miniflare } from 'miniflare';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { WORKERD_STORES } from '../contract/stores.js';
import { VARIANTS, variantName } from '../contract/variants.js';
import { bundleWorker } from '../support/worker-bundle.js';

const source = (path: string) => fileURLToPath(new URL(path, import.meta.url));

let mf: Miniflare;

beforeAll(async () => {
  mf = new Miniflare({
    modules: true,
    script: await bundleWorker(source('../workerd/contract-worker.ts'), undefined, {
      vitest: source('../workerd/test-registry.ts'),
    }),
    compatibilityDate: '2026-04-01',
    compatibilityFlags: ['nodejs_compat'],
    d1Databases: ['DB'],
    durableObjects: { CONTRACT: { className: 'ContractObject', useSQLite: true } },
  });
  await mf.ready;
}, 600_000);

afterAll(async () => {
  await mf?.dispose();
});

interface RunReport {
  readonly passed: string[];
  readonly failed: { readonly name: string; readonly error: string }[];
}

// The same suites the Node stores run (test/contract/), bundled into the Worker and run there
// where the store lives: each answers which of its tests passed and which failed, and why.
describe.each(WORKERD_STORES)('$name inside workerd (Miniflare)', (entry) => {
  for (const { label } of VARIANTS) {
    for (const contract of ['store contract', 'lease contract']) {
      const suite = `${contract}: ${variantName(entry.binding, label)}`;
      it(`passes the ${variantName(contract, label)}`, async () => {
        const response = await mf.dispatchFetch(
          `http://worker/${entry.binding}?suite=${encodeURIComponent(suite)}`,
        );
        const text = await response.text();
        expect(response.status, text).toBe(200);
        const report = JSON.parse(text) as RunReport;
        expect(report.failed).toEqual([]);
        expect(report.passed.length).toBeGreaterThan(20);
      }, 600_000);
    }
  }
});
