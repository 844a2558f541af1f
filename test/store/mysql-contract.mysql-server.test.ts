import { mysqlKeysTable } from '../../src/mysql/index.js';
import { describeLeaseContract } from '../contract/lease-contract.js';
import { describeStoreContract } from '../contract/store-contract.js';
import { mysqlHarness, mysqlUrl } from '../support/mysql.js';

// Collected only when MYSQL_URL is set (see vitest.config.ts); then an unreachable server fails.
const url = mysqlUrl() as string;
describeStoreContract('MySQL server', mysqlHarness(url));
describeStoreContract(
  'MySQL server, table renamed',
  mysqlHarness(url, { table: mysqlKeysTable('idem_keys') }),
);
// With a logger on the database, the store runs every statement through drizzle.
describeStoreContract('MySQL server, through drizzle', mysqlHarness(url, { viaDrizzle: true }));
describeLeaseContract('MySQL server', mysqlHarness(url));
describeLeaseContract(
  'MySQL server, table renamed',
  mysqlHarness(url, { table: mysqlKeysTable('idem_keys') }),
);
describeLeaseContract('MySQL server, through drizzle', mysqlHarness(url, { viaDrizzle: true }));
