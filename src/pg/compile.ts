import { entityKind, is, NoopLogger } from 'drizzle-orm';
import { paramSlot } from '../core/query-params.js';
import type { AnyPgDatabase } from './store.js';

/** A drizzle PostgreSQL query that can show its SQL and be prepared under a name. */
export interface PgQuery<R> {
  toSQL(): { sql: string; params: unknown[] };
  prepare(name: string): { execute(placeholderValues?: Record<string, unknown>): Promise<R> };
}

/** Runs one compiled query with its placeholder values and resolves to its rows. */
export type PgStatement<K extends string, R> = (values: Readonly<Record<K, unknown>>) => Promise<R>;

// The one method of a node-postgres `Pool`, `Client` or `PoolClient` the store calls: a query
// config naming the statement, which all three accept and which makes the server parse the
// statement once per connection.
interface NodePgQueryable {
  query(config: {
    name: string;
    text: string;
    values: unknown[];
    types: typeof STORE_TYPES;
  }): Promise<{ rows: unknown[] }>;
}

const BOOL_OID = 16;
const INT4_OID = 23;
const INT8_OID = 20;
const FLOAT8_OID = 701;
const asText = (value: string) => value;
const asBoolean = (value: string) => value === 't';
const asInteger = (value: string) => Number.parseInt(value, 10);

// Every column the store reads is text, double precision, integer, bigint (the fencing token,
// always a safe integer) or boolean. Pinning their
// parsers per query gives the rows drizzle's column mapping gives (strings, numbers, booleans)
// even when an application has replaced node-postgres's global type parsers.
const STORE_TYPES = {
  getTypeParser: (oid: number) => {
    if (oid === FLOAT8_OID) return Number.parseFloat;
    if (oid === INT4_OID || oid === INT8_OID) return asInteger;
    if (oid === BOOL_OID) return asBoolean;
    return asText;
  },
};

// drizzle's `is` needs the class itself; importing drizzle-orm/node-postgres would load `pg`, which
// PGlite users need not install. The entity kind names the class just as well.
function isEntityKind(value: unknown, kind: string): boolean {
  if (typeof value !== 'object' || value === null) return false;
  for (
    let cls: unknown = value.constructor;
    typeof cls === 'function';
    cls = Object.getPrototypeOf(cls)
  ) {
    if ((cls as { [entityKind]?: string })[entityKind] === kind) return true;
  }
  return false;
}

/**
 * The node-postgres client under `db` when its statements can be sent to it directly, else
 * `undefined`. Only a database made by `drizzle-orm/node-postgres` qualifies, and only without a
 * logger or a cache, so that a logger configured on it keeps seeing every statement. A
 * transaction (`db.transaction(tx => …)`) is a different entity, without a `$client`: it keeps
 * drizzle's path, which runs on the transaction's own connection.
 *
 * @param db - any drizzle PostgreSQL database or transaction
 */
export function directNodePgClient(db: AnyPgDatabase): NodePgQueryable | undefined {
  if (!isEntityKind(db, 'NodePgDatabase')) return undefined;
  const { $client: client, $cache: cache } = db as unknown as {
    $client?: unknown;
    $cache?: unknown;
  };
  const logger = (db._.session as unknown as { logger?: unknown }).logger;
  if (cache !== undefined || !is(logger, NoopLogger)) return undefined;
  const query = (client as { query?: unknown } | null | undefined)?.query;
  return typeof query === 'function' ? (client as NodePgQueryable) : undefined;
}

/**
 * Compiles a drizzle query once into a function that runs it as the named prepared statement
 * `name`. Over a node-postgres database (see {@link directNodePgClient}) the statement goes
 * straight to the driver with drizzle's own SQL text, and its rows come back as the driver reads
 * them: the per-call placeholder filling and row mapping of drizzle's prepared queries are skipped.
 * Every other driver (PGlite, a transaction, …) runs drizzle's prepared query under the same name.
 *
 * The query's placeholders must be exactly `names`, so a query whose parameters drift fails here,
 * when the store is built, instead of sending a value as NULL. Its selected or returned fields
 * must carry their columns' names, so both paths give rows of the same shape.
 *
 * @param db - the drizzle database the query was built on
 * @param name - the prepared statement's name, unique per SQL text
 * @param query - a drizzle query whose parameters are placeholders or fixed values
 * @param names - the names of the query's placeholders
 * @throws Error when the query's placeholders are not exactly `names`
 */
export function compilePgStatement<K extends string, R>(
  db: AnyPgDatabase,
  name: string,
  query: PgQuery<R>,
  names: readonly K[],
): PgStatement<K, R> {
  const { sql: text, params } = query.toSQL();
  const slots = params.map(paramSlot);
  const used = new Set(slots.flatMap((slot) => ('name' in slot ? [slot.name] : [])));
  const expected = new Set<string>(names);
  if (used.size !== expected.size || [...used].some((placeholder) => !expected.has(placeholder))) {
    throw new Error(
      `query placeholders are [${[...used].join(', ')}], expected [${[...expected].join(', ')}]`,
    );
  }
  const client = directNodePgClient(db);
  if (client === undefined) {
    const prepared = query.prepare(name);
    return (values) => prepared.execute(values);
  }
  return async (values) => {
    const record = values as Readonly<Record<string, unknown>>;
    const bound = slots.map((slot) => ('name' in slot ? record[slot.name] : slot.value));
    const result = await client.query({ name, text, values: bound, types: STORE_TYPES });
    return result.rows as R;
  };
}
