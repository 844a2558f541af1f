import { applyMysqlMigrations } from '../../src/mysql/index.js';
import { freshMysqlDatabase } from '../support/mysql.js';
import { stepsCrashSuite } from './steps-crash-suite.js';

// Runs only when MYSQL_URL is set (see vitest.config.ts); then an unreachable server fails it.
const url = process.env.MYSQL_URL as string;

stepsCrashSuite('MariaDB (mysql2, server)', async () => {
  const database = await freshMysqlDatabase(url);
  await applyMysqlMigrations(database.db);
  await database.pool.query('CREATE TABLE ledger (id varchar(64) NOT NULL, charge text NOT NULL)');
  await database.pool.query('CREATE TABLE outbox (id varchar(64) NOT NULL)');
  const all = async (query: string, prefix: string) => {
    const [rows] = (await database.pool.query(query, [`${prefix}-%`])) as unknown as [
      { id: string | Buffer; value: string | number }[],
    ];
    // The keys table's ids are VARBINARY: they come back as bytes.
    return new Map(
      rows.map((row) => [
        String(row.id),
        (typeof row.value === 'object' ? String(row.value) : row.value) as never,
      ]),
    );
  };
  return {
    args: ['mysql', database.url],
    rows: (table, prefix) =>
      all(`SELECT id, count(*) AS value FROM ${table} WHERE id LIKE ? GROUP BY id`, prefix),
    charges: (prefix) => all('SELECT id, charge AS value FROM ledger WHERE id LIKE ?', prefix),
    statuses: (prefix) => all('SELECT id, status AS value FROM `keys` WHERE id LIKE ?', prefix),
    close: () => database.drop(),
  };
});
