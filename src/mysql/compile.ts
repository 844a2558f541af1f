import { is, NoopLogger } from 'drizzle-orm';
import { isEntityKind } from '../core/entity-kind.js';
import { compileSlots } from '../core/query-params.js';
import type { AnyMysqlDatabase } from './client.js';

/** A drizzle MySQL query that can show its SQL and be prepared. */
export interface MysqlQuery<R> {
  toSQL(): { sql: string; params: unknown[] };
  prepare(): { execute(placeholderValues?: Record<string, unknown>): Promise<R> };
}

/** What a compiled query resolves to: the rows of a select, or the header of a write. */
export type MysqlAnswer = 'rows' | 'header';

/** What an INSERT, UPDATE or DELETE answers, whatever the driver. */
export interface WriteHeader {
  readonly affectedRows: number;
  /** The statement's `LAST_INSERT_ID()`; 0 when it set none. */
  readonly insertId: number;
}

/**
 * The write header of what drizzle answered for a write: mysql2's `[ResultSetHeader, fields]`
 * (or the header alone, from the driver directly), or the PlanetScale serverless driver's
 * executed query, which counts in `rowsAffected` and gives `insertId` as a string.
 *
 * @param result - what the write resolved to
 */
export function writeHeader(result: unknown): WriteHeader {
  const header = (Array.isArray(result) ? result[0] : result) as {
    readonly affectedRows?: number;
    readonly rowsAffected?: number;
    readonly insertId?: number | string;
  };
  return {
    affectedRows: Number(header.affectedRows ?? header.rowsAffected ?? 0),
    insertId: Number(header.insertId ?? 0),
  };
}

/** Runs one compiled query with its placeholder values. */
export type MysqlStatement<K extends string, R> = (
  values: Readonly<Record<K, unknown>>,
) => Promise<R>;

// The one method of a mysql2 promise pool or connection the store calls: the same text-protocol
// query drizzle's mysql2 session sends.
interface Mysql2Queryable {
  query(sql: string, values: unknown[]): Promise<[unknown, unknown]>;
}

/**
 * The mysql2 client under `db` when statements can be sent to it directly, else `undefined`.
 * Only a database made by `drizzle-orm/mysql2`'s `drizzle()` qualifies, and only without a logger
 * or a cache, so that a logger configured on it keeps seeing every statement. A transaction is a
 * different entity and keeps drizzle's path, on the transaction's own connection.
 *
 * @param db - any drizzle mysql2 database or transaction
 */
function directMysqlClient(db: AnyMysqlDatabase): Mysql2Queryable | undefined {
  if (!isEntityKind(db, 'MySql2Database')) return undefined;
  const { $cache: cache, session } = db as unknown as {
    $cache?: unknown;
    session?: { client?: unknown; logger?: unknown };
  };
  if (cache !== undefined || !is(session?.logger, NoopLogger)) return undefined;
  const query = (session?.client as { query?: unknown } | undefined)?.query;
  return typeof query === 'function' ? (session?.client as Mysql2Queryable) : undefined;
}

/**
 * Compiles a drizzle query once into a function that runs it and resolves to its rows (a select)
 * or its write header (`affectedRows`). Over a plain mysql2 database (see
 * {@link directMysqlClient}) the query goes straight to the driver with drizzle's own SQL text:
 * drizzle's per-call placeholder filling and row mapping are skipped. Every other database runs
 * drizzle's prepared query.
 *
 * Only selects whose fields need no decoding (text and numbers, named as their columns) may go
 * through here: VARBINARY columns come back from the driver as Buffers.
 *
 * @param db - the drizzle database the query was built on
 * @param query - a drizzle query whose parameters are placeholders or fixed values
 * @param names - the names of the query's placeholders
 * @param answer - whether the query is a select (`rows`) or a write (`header`)
 * @throws Error when the query's placeholders are not exactly `names`
 */
export function compileMysqlStatement<K extends string, R>(
  db: AnyMysqlDatabase,
  query: MysqlQuery<unknown>,
  names: readonly K[],
  answer: MysqlAnswer,
): MysqlStatement<K, R> {
  const { sql: text, slots } = compileSlots(query, names);
  const client = directMysqlClient(db);
  if (client === undefined) {
    const prepared = query.prepare();
    // drizzle answers a select with its mapped rows and a write with the driver's own shape.
    return async (values) => {
      const result = await prepared.execute(values);
      return (answer === 'rows' ? result : writeHeader(result)) as R;
    };
  }
  return async (values) => {
    const record = values as Readonly<Record<string, unknown>>;
    const [result] = await client.query(
      text,
      slots.map((slot) => ('name' in slot ? record[slot.name] : slot.value)),
    );
    return (answer === 'rows' ? result : writeHeader(result)) as R;
  };
}
