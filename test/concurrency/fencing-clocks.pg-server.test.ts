import { openPgStore } from '../../src/pg/index.js';
import { describeFencingClocks } from '../support/fencing-clocks-suite.js';
import { freshServerDatabase, serverUrl } from '../support/pg.js';

// Collected only when DATABASE_URL is set (see vitest.config.ts); then an unreachable server fails.
const url = serverUrl() as string;

describeFencingClocks('PostgreSQL server', async () => {
  const database = await freshServerDatabase(url);
  const store = await openPgStore(database.url, { poolSize: 1 });
  return {
    target: database.url,
    store,
    close: async () => {
      await store.close();
      await database.drop();
    },
  };
});
