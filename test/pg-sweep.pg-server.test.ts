import { drizzle } from 'drizzle-orm/node-postgres';
import pg from 'pg';
import { afterAll } from 'vitest';
import { serverUrl } from './support/pg.js';
import { describePgSweep } from './support/pg-sweep-suite.js';

const pool = new pg.Pool({ connectionString: serverUrl() as string, max: 2 });
afterAll(() => pool.end());

describePgSweep('the PostgreSQL server', async () => drizzle(pool));
