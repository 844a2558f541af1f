import type { SQL } from 'drizzle-orm';
import type * as pgCore from 'drizzle-orm/pg-core';
import { type DrizzleDatabaseKind, hasMethod } from '../core/database-identity.js';
import type { ClassOf } from '../core/drizzle-types.js';

/**
 * Any drizzle PostgreSQL database, whatever its driver (node-postgres, PGlite, …) and schema:
 * drizzle 0.45's `PgDatabase` or 1.0's `PgAsyncDatabase`, whichever the installed drizzle-orm has.
 */
export type AnyPgDatabase = ClassOf<typeof pgCore, ['PgAsyncDatabase', 'PgDatabase']>;

/**
 * Runs `statement` and returns its rows, whatever the driver: node-postgres and PGlite answer
 * `execute` with an object holding `rows`, postgres-js with the array of rows itself.
 */
export async function queryRows<Row>(
  db: Pick<AnyPgDatabase, 'execute'>,
  statement: SQL,
): Promise<Row[]> {
  const result = (await db.execute(statement)) as unknown as Row[] | { rows: Row[] };
  return Array.isArray(result) ? result : result.rows;
}

/**
 * drizzle's PostgreSQL databases (`PgDatabase` in 0.45, `PgAsyncDatabase` in 1.0; transactions
 * are subclasses) and their clients: a node-postgres `Pool` or `Client`, PGlite and Neon's `Pool`
 * answer `query`, postgres-js's `sql` has `unsafe`, Neon's `neon()` function has `query`.
 */
export const PG_DATABASE: DrizzleDatabaseKind = {
  drivers: 'node-postgres, postgres-js, pglite, neon-serverless or neon-http',
  kinds: ['PgDatabase', 'PgAsyncDatabase'],
  isClient: (client) => hasMethod(client, 'query') || hasMethod(client, 'unsafe'),
};
