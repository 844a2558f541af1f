import { sqliteKeysTable } from '../../src/libsql/index.js';
import { describeLeaseContract } from '../contract/lease-contract.js';
import { describeStoreContract } from '../contract/store-contract.js';
import { libsqlHarness } from '../support/libsql-harness.js';
import { tempDir } from '../support/temp.js';

describeStoreContract('libSQL file', libsqlHarness(tempDir()));
describeStoreContract(
  'libSQL file, table renamed',
  libsqlHarness(tempDir(), { table: sqliteKeysTable('idem_keys') }),
);

describeLeaseContract('libSQL file', libsqlHarness(tempDir()));
describeLeaseContract(
  'libSQL file, table renamed',
  libsqlHarness(tempDir(), { table: sqliteKeysTable('idem_keys') }),
);
