import { sql } from 'drizzle-orm';
import { applyMysqlMigrations, MysqlIdempotencyStore } from '../../src/mysql/index.js';
import { freshMysqlDatabase, readMysqlRows } from '../support/mysql.js';
import type { ModelTarget } from './commands.js';

/**
 * One store in a fresh database of the real server for a whole model run; the table is emptied
 * between sequences and the database dropped by `close()`.
 */
export async function mysqlServerTarget(
  url: string,
): Promise<ModelTarget & { close(): Promise<void> }> {
  const server = await freshMysqlDatabase(url, 2);
  await applyMysqlMigrations(server.db);
  const store = new MysqlIdempotencyStore(server.db);
  return {
    store,
    rows: () => readMysqlRows(server.db),
    clear: async () => {
      await server.db.execute(sql`DELETE FROM \`keys\``);
    },
    close: async () => {
      await store.close();
      await server.drop();
    },
  };
}
