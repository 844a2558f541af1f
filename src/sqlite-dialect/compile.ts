import { compileSlots, type ToSql } from '../core/query-params.js';

/**
 * A statement as every SQLite runtime runs it: its text and the values of its `?` parameters,
 * in order. The one statement type of the SQLite dialect, for the store's queries and the
 * migrator's alike.
 */
export interface SqliteStatement {
  /** The SQL text. */
  readonly sql: string;
  /** The values of its `?` parameters, in order. */
  readonly args: readonly unknown[];
}

/** A value a SQLite driver binds to a parameter. */
type SqliteValue = null | string | number | bigint | boolean | ArrayBuffer | Uint8Array | Date;

/** A drizzle query compiled once to SQLite text, bound by placeholder name on each call. */
export interface CompiledSqliteStatement<Name extends string> {
  /** The SQL text drizzle wrote. */
  readonly sql: string;
  /** The statement with its placeholders filled, ready for any SQLite runtime to run. */
  bind(values: Readonly<Record<Name, SqliteValue>>): SqliteStatement;
}

/**
 * Compiles a drizzle query once, so each call sends the driver its text and arguments directly:
 * no drizzle query building or row mapping per call, while drizzle stays the only source of the
 * SQL. Fixed values in the query (a status literal) stay bound where drizzle put them; every
 * placeholder must be one of `names`, and every name must be used, so a query that drifts from
 * its callers fails when the store is built.
 *
 * @param query - a drizzle query built with `sql.placeholder` for the per-call values
 * @param names - the placeholder names the query uses
 * @throws Error when the query's placeholders are not exactly `names`, or one carries a column
 * encoder
 */
export function compileSqliteStatement<Name extends string>(
  query: ToSql,
  names: readonly Name[],
): CompiledSqliteStatement<Name> {
  const { sql, slots } = compileSlots(query, names);
  return {
    sql,
    bind: (values) => ({
      sql,
      args: slots.map((slot) => ('name' in slot ? values[slot.name as Name] : slot.value)),
    }),
  };
}
