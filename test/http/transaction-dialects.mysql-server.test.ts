import { count, sql } from 'drizzle-orm';
import {
  applyMysqlMigrations,
  keys,
  type MysqlHandlerTransaction,
  MysqlIdempotencyStore,
  mysqlKeysTable,
  mysqlTransaction,
} from '../../src/mysql/index.js';
import { freshMysqlDatabase } from '../support/mysql.js';
import { type HttpDialect, transactionDialectsSuite } from './transaction-dialects-suite.js';

// Runs only when MYSQL_URL is set (see vitest.config.ts); then an unreachable server fails it.
const url = process.env.MYSQL_URL as string;

// The store keeps its keys in a renamed table, beside a default `keys` table that stays empty.
async function mysqlDialect(): Promise<HttpDialect<MysqlHandlerTransaction>> {
  const database = await freshMysqlDatabase(url, 20);
  const table = mysqlKeysTable('idem_keys');
  await applyMysqlMigrations(database.db);
  await applyMysqlMigrations(database.db, { table });
  await database.pool.query(
    'CREATE TABLE payments (ref VARCHAR(64) PRIMARY KEY, amount INT NOT NULL) ENGINE=InnoDB',
  );
  await database.pool.query(`CREATE TRIGGER refuse_answers BEFORE UPDATE ON idem_keys FOR EACH ROW
    BEGIN
      IF NEW.status = 'done' AND NEW.id LIKE 'refused%' THEN
        SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'answers of refused keys are refused';
      END IF;
    END`);
  const store = new MysqlIdempotencyStore(database.db, { table });
  return {
    runner: mysqlTransaction(store),
    pay: (tx, order) =>
      tx.execute(sql`INSERT INTO payments (ref, amount) VALUES (${order.ref}, ${order.amount})`),
    payments: async () => {
      const [rows] = await database.pool.query('SELECT ref FROM payments');
      return (rows as { ref: string }[]).map((row) => row.ref);
    },
    defaultKeys: async () => (await database.db.select({ n: count() }).from(keys))[0]?.n,
    close: () => database.drop(),
  };
}

transactionDialectsSuite([
  { name: 'the MySQL server (mysql2)', open: async () => (await mysqlDialect()) as never },
]);
