import type { InValue } from '@libsql/client';
import { compileSlots, type ToSql } from '../core/query-params.js';

/** A drizzle query compiled once to libSQL text, bound by placeholder name on each call. */
export interface LibsqlStatement<Name extends string> {
  /** The SQL text drizzle wrote. */
  readonly sql: string;
  /** The statement with its placeholders filled, ready for libSQL's `execute` or `batch` (or D1's `bind`). */
  bind(values: Readonly<Record<Name, InValue>>): { sql: string; args: InValue[] };
}

/**
 * Compiles a drizzle query once, so each call sends the libSQL client its text and arguments
 * directly: no drizzle query building or row mapping per call, while drizzle stays the only
 * source of the SQL. Fixed values in the query (a status literal) stay bound where drizzle put
 * them; every placeholder must be one of `names`, and every name must be used, so a query that
 * drifts from its callers fails when the store is built.
 *
 * @param query - a drizzle query built with `sql.placeholder` for the per-call values
 * @param names - the placeholder names the query uses
 * @throws Error when the query's placeholders are not exactly `names`, or one carries a column
 * encoder
 */
export function compileLibsqlStatement<Name extends string>(
  query: ToSql,
  names: readonly Name[],
): LibsqlStatement<Name> {
  const { sql, slots } = compileSlots(query, names);
  return {
    sql,
    bind: (values) => ({
      sql,
      args: slots.map((slot) =>
        'name' in slot ? values[slot.name as Name] : (slot.value as InValue),
      ),
    }),
  };
}
