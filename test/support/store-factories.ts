import type { LeasedIdempotencyStore } from '../../src/index.js';
import { reachableStores } from '../contract/over-stores.js';
import { NODE_STORES } from '../contract/stores.js';
import { VARIANTS } from '../contract/variants.js';

/** A fresh, empty store of one dialect, for the HTTP tests. */
export interface StoreFactory {
  readonly name: string;
  open(): Promise<{ store: LeasedIdempotencyStore<unknown>; close(): Promise<void> }>;
}

/**
 * The stores of the table in `test/contract/stores.ts` the HTTP and function suites run on, on
 * their default table: those marked `http: 'every'`, and for `suite: 'behaviour'` those marked
 * `'behaviour'` too (a store that costs too much per test to run under every suite). A store whose
 * environment is missing is skipped, saying why, or fails the run under CI. Call it at the top
 * level of a test file: the stores' temporary directories, PGlite databases and pools are created
 * on first use and cleaned up when the file ends.
 */
export function storeFactories(suite: 'every' | 'behaviour' = 'every'): StoreFactory[] {
  const [plain] = VARIANTS;
  if (plain === undefined) throw new Error('the table of stores has no default variant');
  const wanted = NODE_STORES.filter(
    (entry) => entry.http === 'every' || (suite === 'behaviour' && entry.http === 'behaviour'),
  );
  return reachableStores(wanted).map((entry) => ({
    name: entry.name,
    open: entry.harness(plain.variant),
  }));
}
