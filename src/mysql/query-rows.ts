import type { SQL } from 'drizzle-orm';
import type { AnyMysqlDatabase } from './store.js';

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
