import type { AnySqliteDatabase } from '../core/drizzle-types.js';
import type { SqliteStatement } from '../sqlite-dialect/compile.js';

/** What the store reads of a D1 result: the rows, and how many rows a write changed. */
export interface D1ResultLike {
  readonly results?: readonly unknown[];
  readonly meta: { readonly changes?: number };
}

/** A D1 prepared statement, as the store uses it. */
export interface D1PreparedStatementLike {
  bind(...values: unknown[]): D1PreparedStatementLike;
  run(): Promise<D1ResultLike>;
  all(): Promise<D1ResultLike>;
}

/**
 * The part of a Cloudflare D1 binding (`env.DB`) the store uses, spelled out so that the library
 * needs neither `@cloudflare/workers-types` nor a driver package: the binding is the driver.
 */
export interface D1DatabaseLike {
  prepare(query: string): D1PreparedStatementLike;
  batch(statements: D1PreparedStatementLike[]): Promise<D1ResultLike[]>;
}

/** Any drizzle database over a D1 binding (`drizzle(env.DB)` from `drizzle-orm/d1`). */
export type AnyD1Database = AnySqliteDatabase & { $client: D1DatabaseLike };

/** Prepares a compiled statement on the binding. */
export function prepare(
  client: D1DatabaseLike,
  statement: SqliteStatement,
): D1PreparedStatementLike {
  const prepared = client.prepare(statement.sql);
  return statement.args.length === 0 ? prepared : prepared.bind(...statement.args);
}

/** The rows of a D1 result, as plain objects. */
export function rowsOf<Row>(result: D1ResultLike | undefined): Row[] {
  return (result?.results ?? []) as Row[];
}
