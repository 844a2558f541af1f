import { drizzle as drizzleNodePg } from 'drizzle-orm/node-postgres';
import { migrate as migrateNodePg } from 'drizzle-orm/node-postgres/migrator';
import { drizzle as drizzlePostgresJs } from 'drizzle-orm/postgres-js';
import { migrate as migratePostgresJs } from 'drizzle-orm/postgres-js/migrator';
import pg from 'pg';
import postgres from 'postgres';
import { freshServerDatabase, serverUrl } from '../support/pg.js';
import { describePgJournal } from '../support/pg-journal-suite.js';

const url = serverUrl() ?? '';

// A database of its own per test, so the application's journal and the store share `public`,
// the layout that made 0.1.0's journal and the application's one table.
describePgJournal('node-postgres, public schema', async () => {
  const database = await freshServerDatabase(url);
  const pool = new pg.Pool({ connectionString: database.url, max: 2 });
  const db = drizzleNodePg({ client: pool });
  return {
    db,
    schema: 'public',
    appMigrate: (migrationsFolder) =>
      migrateNodePg(db, { migrationsFolder, migrationsSchema: 'public' }),
    close: async () => {
      await pool.end();
      await database.drop();
    },
  };
});

describePgJournal('postgres-js, public schema', async () => {
  const database = await freshServerDatabase(url);
  const client = postgres(database.url, { max: 2, onnotice: () => undefined });
  const db = drizzlePostgresJs({ client });
  return {
    db,
    schema: 'public',
    appMigrate: (migrationsFolder) =>
      migratePostgresJs(db, { migrationsFolder, migrationsSchema: 'public' }),
    close: async () => {
      await client.end();
      await database.drop();
    },
  };
});
