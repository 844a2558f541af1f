import { drizzle } from 'drizzle-orm/node-postgres';
import { drizzle as drizzlePostgresJs } from 'drizzle-orm/postgres-js';
import pg from 'pg';
import postgres from 'postgres';
import { afterAll } from 'vitest';
import { serverUrl } from '../support/pg.js';
import { describePgSweep } from '../support/pg-sweep-suite.js';

const pool = new pg.Pool({ connectionString: serverUrl() as string, max: 2 });
afterAll(() => pool.end());

describePgSweep('the PostgreSQL server', async () => drizzle({ client: pool }));

const client = postgres(serverUrl() as string, { max: 2, onnotice: () => undefined });
afterAll(() => client.end());

describePgSweep('the PostgreSQL server through postgres-js', async () =>
  drizzlePostgresJs({ client }),
);
