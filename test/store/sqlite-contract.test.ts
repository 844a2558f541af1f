import { sqliteKeysTable } from '../../src/sqlite/index.js';
import { describeLeaseContract } from '../contract/lease-contract.js';
import { describeStoreContract } from '../contract/store-contract.js';
import { sqliteHarness } from '../support/sqlite-harness.js';
import { tempDir } from '../support/temp.js';

describeStoreContract('SQLite file', sqliteHarness(tempDir()));
describeStoreContract(
  'SQLite file, table renamed',
  sqliteHarness(tempDir(), { table: sqliteKeysTable('idem_keys') }),
);

describeLeaseContract('SQLite file', sqliteHarness(tempDir()));
describeLeaseContract(
  'SQLite file, table renamed',
  sqliteHarness(tempDir(), { table: sqliteKeysTable('idem_keys') }),
);
