import { drizzle } from 'drizzle-orm/node-postgres';
import pg from 'pg';
import { openPgStore } from '../../src/pg/index.js';
import { freshServerDatabase, readPgRows, serverUrl } from '../support/pg.js';
import { describeOwnedPoolClose } from './owned-pool-close-suite.js';

// Collected only when DATABASE_URL is set (see vitest.config.ts); then an unreachable server fails.
const url = serverUrl() as string;

describeOwnedPoolClose('PostgreSQL server', async () => {
  const database = await freshServerDatabase(url);
  const store = await openPgStore(database.url, { poolSize: 4 });
  return {
    store,
    rows: async () => {
      const pool = new pg.Pool({ connectionString: database.url, max: 1 });
      try {
        return await readPgRows(drizzle({ client: pool }), 'public');
      } finally {
        await pool.end();
      }
    },
    drop: async () => {
      await store.close();
      await database.drop();
    },
  };
});
