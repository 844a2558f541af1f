import { openMysqlStore } from '../../src/mysql/index.js';
import { freshMysqlDatabase, mysqlUrl, readMysqlRows } from '../support/mysql.js';
import { describeOwnedPoolClose } from './owned-pool-close-suite.js';

// Collected only when MYSQL_URL is set (see vitest.config.ts); then an unreachable server fails.
const url = mysqlUrl() as string;

describeOwnedPoolClose('MySQL server', async () => {
  const database = await freshMysqlDatabase(url, 1);
  const store = await openMysqlStore(database.url, { poolSize: 4 });
  return {
    store,
    rows: () => readMysqlRows(database.db),
    drop: async () => {
      await store.close();
      await database.drop();
    },
  };
});
