import { describe, it } from 'vitest';
import { underBun } from '../support/bun-harness.js';
import type { HarnessFactory } from './harness.js';
import { NODE_STORES, type StoreEntry, type StoreGroup } from './stores.js';
import { VARIANTS, variantHarness, variantName } from './variants.js';

// Why `entry` cannot run in this process, or `undefined` when it can. bun:sqlite is left to
// test/runtimes/bun-runtime.test.ts, which runs the suites again under Bun.
function missingEnvironment(entry: StoreEntry): string | undefined {
  switch (entry.needs) {
    case 'node':
      return undefined;
    case 'bun':
      return underBun ? undefined : 'runs under Bun (test/runtimes/bun-runtime.test.ts)';
    default:
      return process.env[entry.needs] ? undefined : `${entry.needs} is not set`;
  }
}

/**
 * The stores of `entries` this process can reach. The others are skipped, saying why, on a
 * developer's machine; under CI (which sets every server's URL) a missing server fails the run.
 * Under Bun, the Node stores are left out: better-sqlite3 does not load there, and the run under
 * Bun is about bun:sqlite.
 */
export function reachableStores(entries: readonly StoreEntry[]): StoreEntry[] {
  const reachable: StoreEntry[] = [];
  for (const entry of entries) {
    if (underBun && entry.needs === 'node') continue;
    const missing = missingEnvironment(entry);
    if (missing === undefined) {
      reachable.push(entry);
      continue;
    }
    if (process.env.CI !== undefined && entry.needs !== 'bun')
      throw new Error(`${entry.name} must run under CI, but ${missing}`);
    console.warn(`${entry.name}: skipped, ${missing}`);
    describe(entry.name, () => {
      it.skip(`skipped: ${missing}`, () => {});
    });
  }
  return reachable;
}

/**
 * Runs `suite` (the store or lease contract) over every store of `group` in the table and every
 * variant, as Kysely's tests loop over their dialects.
 */
export function describeOverStores(
  group: StoreGroup,
  suite: (name: string, harness: HarnessFactory) => void,
): void {
  for (const entry of reachableStores(NODE_STORES.filter((store) => store.group === group))) {
    for (const { label, variant } of VARIANTS) {
      suite(variantName(entry.name, label), variantHarness(entry.harness(variant), variant));
    }
  }
}
