import { describeStoreContract } from './contract/store-contract.js';
import { mysqlHarness, mysqlUrl } from './support/mysql.js';

// Collected only when MYSQL_URL is set (see vitest.config.ts); then an unreachable server fails.
describeStoreContract('MySQL server', mysqlHarness(mysqlUrl() as string));
describeStoreContract(
  'MySQL server, every statement through drizzle',
  mysqlHarness(mysqlUrl() as string, true),
);
