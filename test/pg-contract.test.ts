import { describeStoreContract } from './contract/store-contract.js';
import { pgliteHarness, serverHarness, serverUrl } from './support/pg.js';

describeStoreContract('PGlite', pgliteHarness());

// The real server whenever DATABASE_URL is set (CI sets it); if it is set but unreachable, every
// test below fails instead of being skipped.
const url = serverUrl();
if (url !== undefined) describeStoreContract('PostgreSQL server', serverHarness(url));
