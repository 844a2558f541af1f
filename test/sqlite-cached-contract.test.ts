import { describeStoreContract } from './contract/store-contract.js';
import { sqliteHarness } from './support/sqlite-harness.js';
import { tempDir } from './support/temp.js';

// The answer cache must not change a single observable result of the contract.
describeStoreContract(
  'SQLite file with an answer cache',
  sqliteHarness(tempDir(), { answerCacheSize: 64 }),
);
