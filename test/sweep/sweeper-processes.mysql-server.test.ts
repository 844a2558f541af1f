import { describe, it } from 'vitest';
import { openMysqlStore } from '../../src/mysql/index.js';
import { freshMysqlDatabase, mysqlUrl } from '../support/mysql.js';
import { expectOneSweeperAtATime } from '../support/sweeper-processes.js';

// Collected only when MYSQL_URL is set (see vitest.config.ts); then an unreachable server fails.
const url = mysqlUrl() as string;

describe('startSweeper in several processes on one MySQL/MariaDB database', () => {
  it('sweeps every expired row with at most one process sweeping at a time', async () => {
    const database = await freshMysqlDatabase(url, 2);
    const store = await openMysqlStore(database.pool);
    try {
      await expectOneSweeperAtATime(store, { dialect: 'mysql', location: database.url });
    } finally {
      await store.close();
      await database.drop();
    }
  }, 180_000);
});
