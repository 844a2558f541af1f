import { sql } from 'drizzle-orm';
import { afterAll } from 'vitest';
import { openMysqlStore } from '../../src/mysql/index.js';
import {
  freshMysqlDatabase,
  type MysqlDatabase,
  mysqlUrl,
  readMysqlRows,
} from '../support/mysql.js';
import { encryptionSuite } from './encryption-suite.js';

// Collected only when MYSQL_URL is set (see vitest.config.ts); then an unreachable server fails.
const url = mysqlUrl() as string;
const databases: MysqlDatabase[] = [];
afterAll(async () => {
  for (const database of databases) await database.drop();
});

encryptionSuite('the MySQL server (MariaDB)', async () => {
  const database = await freshMysqlDatabase(url);
  databases.push(database);
  await (await openMysqlStore(database.pool)).close();
  return {
    open: (encryption) =>
      openMysqlStore(database.pool, encryption === undefined ? {} : { encryption }),
    responses: async () =>
      new Map((await readMysqlRows(database.db)).map((row) => [row.id, row.response])),
    overwrite: async (id, value) => {
      await database.db.execute(sql`UPDATE \`keys\` SET response = ${value} WHERE id = ${id}`);
    },
  };
});
