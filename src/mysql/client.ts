import type { SQL } from 'drizzle-orm';
import type { MySql2Database } from 'drizzle-orm/mysql2';
import { type DrizzleDatabaseKind, hasMethod } from '../core/database-identity.js';

/** Any drizzle database over mysql2 (a pool or a single connection), whatever its schema. */
// biome-ignore lint/suspicious/noExplicitAny: the store uses its own table, never the app's schema
export type AnyMysqlDatabase = MySql2Database<any>;

/**
 * Runs a statement and returns its rows: mysql2 answers `[rows, fields]`, PlanetScale's
 * serverless driver an object holding `rows`.
 */
export async function queryRows<Row>(
  db: Pick<AnyMysqlDatabase, 'execute'>,
  statement: SQL,
): Promise<Row[]> {
  const result = (await db.execute(statement)) as unknown as [Row[]] | { rows: Row[] };
  return Array.isArray(result) ? result[0] : result.rows;
}

/**
 * drizzle's MySQL databases (transactions are subclasses) and their clients: a mysql2 pool or
 * connection, or PlanetScale's `Client`, each answering `execute`.
 */
export const MYSQL_DATABASE: DrizzleDatabaseKind = {
  drivers: 'mysql2 or planetscale-serverless',
  kinds: ['MySqlDatabase'],
  isClient: (client) => hasMethod(client, 'execute'),
};
