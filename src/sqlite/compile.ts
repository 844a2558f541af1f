import type BetterSqlite3 from 'better-sqlite3';
import { compileSlots, type ToSql } from '../core/query-params.js';

/**
 * Prepares a drizzle query directly on the better-sqlite3 connection, so the hot paths pay for
 * neither drizzle's placeholder filling nor its row mapping, while drizzle stays the only source
 * of the SQL. Every parameter of the query must be a `sql.placeholder`, in exactly the order
 * given by `names`: callers then pass values positionally, and a query whose parameters drift
 * from that order fails here, when the store is built, instead of binding values to the wrong
 * columns.
 *
 * @param client - the better-sqlite3 connection the query runs on
 * @param query - a drizzle query built with placeholders only
 * @param names - the placeholder names, in the order the SQL binds them
 * @throws Error when the query's parameters are not exactly these placeholders, or one of them
 * carries a column encoder
 */
export function compileStatement(
  client: BetterSqlite3.Database,
  query: ToSql,
  names: readonly string[],
): BetterSqlite3.Statement {
  return client.prepare(compileSlots(query, names, true).sql);
}
