import { sql } from 'drizzle-orm';
import { afterAll } from 'vitest';
import { openPgStore } from '../../src/pg/index.js';
import { freshServerSchema, type ServerSchema, serverUrl } from '../support/pg.js';
import { encryptionSuite } from './encryption-suite.js';

// Collected only when DATABASE_URL is set (see vitest.config.ts); then an unreachable server fails.
const url = serverUrl() as string;
const schemas: ServerSchema[] = [];
afterAll(async () => {
  for (const schema of schemas) await schema.drop();
});

encryptionSuite('the PostgreSQL server', async () => {
  const server = await freshServerSchema(url);
  schemas.push(server);
  await (await openPgStore(server.pool, { schema: server.schema })).close();
  const qualified = sql.raw(`"${server.schema}"."keys"`);
  return {
    open: (encryption) =>
      openPgStore(server.pool, {
        schema: server.schema,
        ...(encryption === undefined ? {} : { encryption }),
      }),
    responses: async () => {
      const { rows } = await server.pool.query<{ id: string; response: string | null }>(
        `SELECT id, response FROM "${server.schema}"."keys"`,
      );
      return new Map(rows.map((row) => [row.id, row.response]));
    },
    overwrite: async (id, value) => {
      await server.db.execute(sql`UPDATE ${qualified} SET response = ${value} WHERE id = ${id}`);
    },
  };
});
