import { sql } from 'drizzle-orm';
import { applyPgMigrations, PgIdempotencyStore, quoteIdentifier } from '../../src/pg/index.js';
import { freshServerSchema, readPgRows } from '../support/pg.js';
import type { ModelTarget } from './commands.js';

/**
 * One store in a fresh schema of the real server for a whole model run; the table is emptied
 * between sequences and the schema dropped by `close()`.
 */
export async function pgServerTarget(
  url: string,
): Promise<ModelTarget & { close(): Promise<void> }> {
  const server = await freshServerSchema(url, 2);
  await applyPgMigrations(server.db, { schema: server.schema });
  const store = new PgIdempotencyStore(server.db, { schema: server.schema });
  const clear = sql.raw(`DELETE FROM ${quoteIdentifier(server.schema)}.keys`);
  return {
    store,
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
