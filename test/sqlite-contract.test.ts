import { sqliteKeysTable } from '../src/sqlite/index.js';
import { describeStoreContract } from './contract/store-contract.js';
import { sqliteHarness } from './support/sqlite-harness.js';
import { tempDir } from './support/temp.js';

describeStoreContract('SQLite file', sqliteHarness(tempDir()));
describeStoreContract(
  'SQLite file, table renamed',
  sqliteHarness(tempDir(), { table: sqliteKeysTable('idem_keys') }),
);
