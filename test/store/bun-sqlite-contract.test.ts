import { describe, it } from 'vitest';
import { sqliteKeysTable } from '../../src/bun-sqlite/index.js';
import { describeLeaseContract } from '../contract/lease-contract.js';
import { describeStoreContract } from '../contract/store-contract.js';
import { bunSqliteHarness, underBun } from '../support/bun-harness.js';
import { tempDir } from '../support/temp.js';

// Only Bun has bun:sqlite: under Node this file only says so, and test/runtimes/bun-runtime.test.ts runs
// it under Bun (`bun --bun vitest run`), where every suite below runs.
if (underBun) {
  describeStoreContract('bun:sqlite file', bunSqliteHarness(tempDir()));
  describeStoreContract(
    'bun:sqlite file, table renamed',
    bunSqliteHarness(tempDir(), { table: sqliteKeysTable('idem_keys') }),
  );
  describeLeaseContract('bun:sqlite file', bunSqliteHarness(tempDir()));
} else {
  describe('bun:sqlite store', () => {
    it.skip('runs under Bun only: test/runtimes/bun-runtime.test.ts runs this file with bun', () => {});
  });
}
