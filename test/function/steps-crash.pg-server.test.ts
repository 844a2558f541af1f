import { sql } from 'drizzle-orm';
import { queryRows } from '../../src/pg/client.js';
import { applyPgMigrations } from '../../src/pg/index.js';
import { freshServerSchema } from '../support/pg.js';
import { stepsCrashSuite } from './steps-crash-suite.js';

// Runs only when DATABASE_URL is set (see vitest.config.ts); then an unreachable server fails it.
const url = process.env.DATABASE_URL as string;

stepsCrashSuite('PostgreSQL (node-postgres, server)', async () => {
  const server = await freshServerSchema(url);
  const { db, schema } = server;
  await applyPgMigrations(db, { schema });
  const table = (name: string) => sql.raw(`"${schema}".${name}`);
  await db.execute(sql`CREATE TABLE ${table('ledger')} (id text NOT NULL, charge text NOT NULL)`);
  await db.execute(sql`CREATE TABLE ${table('outbox')} (id text NOT NULL)`);
  const all = async (query: ReturnType<typeof sql>) =>
    new Map(
      (await queryRows<{ id: string; value: string }>(db, query)).map((row) => [
        row.id,
        row.value as never,
      ]),
    );
  return {
    args: ['pg', `${url}#${schema}`],
    rows: async (name, prefix) =>
      all(
        sql`SELECT id, count(*)::int AS value FROM ${table(name)} WHERE id LIKE ${`${prefix}-%`} GROUP BY id`,
      ),
    charges: async (prefix) =>
      all(sql`SELECT id, charge AS value FROM ${table('ledger')} WHERE id LIKE ${`${prefix}-%`}`),
    statuses: async (prefix) =>
      all(sql`SELECT id, status AS value FROM ${table('keys')} WHERE id LIKE ${`${prefix}-%`}`),
    close: () => server.drop(),
  };
});
