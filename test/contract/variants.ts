import type { Keyring } from '../../src/index.js';
import type { HarnessFactory } from './harness.js';
import { CONTRACT_KEYRING, sealedHarness } from './sealed-harness.js';

/** How a store is opened for one run of a suite: its table's name and its keyring, if any. */
export interface StoreVariant {
  readonly table: string;
  readonly encryption?: Keyring;
}

/**
 * The suites' variants: the default table, and a renamed table whose answers are sealed at rest.
 * The two options touch different code (the table's derived names; the response column's
 * contents), so one run covers both at half the time of a run each.
 */
export const VARIANTS: readonly { readonly label: string; readonly variant: StoreVariant }[] = [
  { label: '', variant: { table: 'keys' } },
  {
    label: 'table renamed, encryption on',
    variant: { table: 'idem_keys', encryption: CONTRACT_KEYRING },
  },
];

/** The name of a suite's run: the store's name, and the variant's label after a comma. */
export function variantName(store: string, label: string): string {
  return label === '' ? store : `${store}, ${label}`;
}

/** `harness` as the contracts see it: its rows unsealed when the variant has encryption on. */
export function variantHarness(harness: HarnessFactory, variant: StoreVariant): HarnessFactory {
  return variant.encryption === undefined ? harness : sealedHarness(harness);
}
