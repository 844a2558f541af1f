import { sql } from 'drizzle-orm';
import type { PgliteDatabase } from 'drizzle-orm/pglite';
import { migrate } from 'drizzle-orm/pglite/migrator';
import { quoteIdentifier } from '../../src/pg/identifier.js';
import { sharedPglite, uniqueName } from '../support/pg.js';
import { describePgJournal } from '../support/pg-journal-suite.js';

const database = sharedPglite();

describePgJournal('PGlite', async () => {
  const db = await database();
  const schema = uniqueName('j');
  await db.execute(sql.raw(`CREATE SCHEMA ${quoteIdentifier(schema)}`));
  return {
    db,
    schema,
    appMigrate: (migrationsFolder) =>
      migrate(db as PgliteDatabase, { migrationsFolder, migrationsSchema: schema }),
    close: async () => {
      await db.execute(sql.raw(`DROP SCHEMA ${quoteIdentifier(schema)} CASCADE`));
    },
  };
});
