import { sql } from 'drizzle-orm';
import { quoteIdentifier } from '../../src/pg/identifier.js';
import { applyPgMigrations, PgIdempotencyStore, pgTransaction } from '../../src/pg/index.js';
import { freshServerSchema, readPgRows } from '../support/pg.js';
import type { TransactionalModelTarget } from './commands.js';

/**
 * One store (and its transactional runner) in a fresh schema of the real server for a whole model run; the table is emptied
 * between sequences and the schema dropped by `close()`.
 */
export async function pgServerTarget(
  url: string,
): Promise<TransactionalModelTarget & { close(): Promise<void> }> {
  const server = await freshServerSchema(url, 2);
  await applyPgMigrations(server.db, { schema: server.schema });
  const store = new PgIdempotencyStore(server.db, { schema: server.schema });
  const clear = sql.raw(`DELETE FROM ${quoteIdentifier(server.schema)}.keys`);
  return {
    store,
    transaction: pgTransaction(store),
    rows: () => readPgRows(server.db, server.schema),
    clear: async () => {
      await server.db.execute(clear);
    },
    close: async () => {
      await store.close();
      await server.drop();
    },
  };
}
