import { Encryption, isSealed } from '../../src/core/encryption.js';
import type { Keyring } from '../../src/index.js';
import type { HarnessFactory, RawRow } from './harness.js';

/**
 * The keyring of the contracts' "encryption on" variant. A fixed key: it protects no secret, and a
 * Worker may not draw random values while its module loads.
 */
export const CONTRACT_KEYRING: Keyring = {
  keys: { contract: Uint8Array.from({ length: 32 }, (_, i) => i * 7 + 1) },
  current: 'contract',
};

/**
 * The harness of a store opened with {@link CONTRACT_KEYRING}, seen by the contracts as plain
 * rows: `rows()` refuses any stored answer that is not sealed (so the response column never holds
 * plaintext, docs/security.md) and hands the contract the opened text; `seed()` seals what it
 * inserts, as the store would have. The contracts then assert the same rows as without encryption.
 */
export function sealedHarness(make: HarnessFactory): HarnessFactory {
  const encryption = new Encryption(CONTRACT_KEYRING);
  return async () => {
    const harness = await make();
    return {
      ...harness,
      rows: async () => {
        const opened: RawRow[] = [];
        for (const row of await harness.rows()) {
          if (row.response === null) {
            opened.push(row);
            continue;
          }
          if (!isSealed(row.response)) {
            throw new Error(`row ${row.id} holds its answer in plain text: ${row.response}`);
          }
          opened.push({ ...row, response: await encryption.open(row.id, row.response) });
        }
        return opened;
      },
      seed: async (rows) => {
        const sealed: RawRow[] = [];
        for (const row of rows) {
          const response =
            row.response === null ? null : await encryption.seal(row.id, row.response);
          sealed.push({ ...row, response });
        }
        await harness.seed(sealed);
      },
    };
  };
}
