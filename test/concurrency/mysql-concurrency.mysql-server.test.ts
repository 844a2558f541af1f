import { drizzle } from 'drizzle-orm/mysql2';
import mysql from 'mysql2/promise';
import { applyMysqlMigrations, MysqlIdempotencyStore } from '../../src/mysql/index.js';
import { describeConcurrency } from '../support/concurrency-suite.js';
import { freshMysqlDatabase, mysqlUrl, readMysqlRows, seedMysqlRows } from '../support/mysql.js';

// Collected only when MYSQL_URL is set (see vitest.config.ts); then an unreachable server fails.
const url = mysqlUrl() as string;

describeConcurrency({
  name: 'MySQL',
  // Two cleaners purge in id order and two sweep in index order, so that the two lock orders meet.
  sweepers: 2,
  fresh: async () => {
    const target = await freshMysqlDatabase(url, 2);
    await applyMysqlMigrations(target.db);
    const pools: mysql.Pool[] = [];
    return {
      stores: (count) =>
        Promise.all(
          Array.from({ length: count }, async () => {
            const pool = mysql.createPool({ uri: target.url, connectionLimit: 1 });
            pools.push(pool);
            await pool.query('SELECT 1');
            return new MysqlIdempotencyStore(drizzle({ client: pool }));
          }),
        ),
      rows: () => readMysqlRows(target.db),
      seed: (rows) => seedMysqlRows(target.db, rows),
      drop: async () => {
        await Promise.all(pools.splice(0).map((pool) => pool.end()));
        await target.drop();
      },
    };
  },
});
