import { describeStoreContract } from './contract/store-contract.js';
import { libsqlHarness } from './support/libsql-harness.js';
import { tempDir } from './support/temp.js';

describeStoreContract('libSQL file', libsqlHarness(tempDir()));
