import { describeLeaseContract } from '../contract/lease-contract.js';
import { describeStoreContract } from '../contract/store-contract.js';
import { pgliteHarness, postgresJsHarness, serverHarness, serverUrl } from '../support/pg.js';

describeStoreContract('PGlite', pgliteHarness());
describeStoreContract('PGlite, table renamed', pgliteHarness('idem_keys'));
describeLeaseContract('PGlite', pgliteHarness());
describeLeaseContract('PGlite, table renamed', pgliteHarness('idem_keys'));

// The real server whenever DATABASE_URL is set (CI sets it); if it is set but unreachable, every
// test below fails instead of being skipped.
const url = serverUrl();
if (url !== undefined) {
  describeStoreContract('PostgreSQL server, node-postgres', serverHarness(url));
  describeStoreContract('PostgreSQL server, postgres-js', postgresJsHarness(url));
  describeLeaseContract('PostgreSQL server, node-postgres', serverHarness(url));
  describeLeaseContract('PostgreSQL server, postgres-js', postgresJsHarness(url));
}
