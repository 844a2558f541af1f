import { randomBytes } from 'node:crypto';
import { is, NoopLogger } from 'drizzle-orm';
import { isEntityKind } from '../core/entity-kind.js';
import { ReplicationUnconfirmedError } from '../core/errors.js';
import { compileSlots } from '../core/query-params.js';
import type { AnyPgDatabase } from './client.js';

/** A prepared drizzle query: what `prepare(name)` gives. */
export interface PgPrepared<R> {
  execute(placeholderValues?: Record<string, unknown>): Promise<R>;
}

/**
 * A drizzle PostgreSQL query that can show its SQL and be prepared, under a name or unnamed
 * (`undefined`: node-postgres then sends an unnamed statement, postgres-js `prepare: false`).
 */
export interface PgQuery<R> {
  toSQL(): { sql: string; params: unknown[] };
  prepare(name?: string): PgPrepared<R>;
}

/**
 * Whether a store's statements are named prepared statements (parsed once per connection) or
 * unnamed ones (parsed on every call, which is what a transaction pooler needs). Shared by every
 * statement of one store: the first statement a server refuses by name turns `named` off for all.
 */
export interface PgStatementMode {
  /** Send named statements. */
  named: boolean;
}

// A Parse of a name the server connection already holds fails with 42P05, a Bind of a name it
// does not hold with 26000; in both cases the statement never ran. Behind a transaction pooler
// (PgBouncer's pool_mode = transaction) consecutive statements of one client connection land on
// different server connections, so both happen.
const DUPLICATE_PREPARED_STATEMENT = '42P05';
const INVALID_SQL_STATEMENT_NAME = '26000';

function sqlState(error: unknown): unknown {
  const { code, cause } = (error ?? {}) as { code?: unknown; cause?: unknown };
  return typeof code === 'string' && /^[0-9A-Z]{5}$/.test(code)
    ? code
    : (cause as { code?: unknown } | undefined)?.code;
}

/**
 * Whether `error` (a driver error, or drizzle's wrapper of one) is a server refusing a statement
 * name: a statement that never ran, so it can be sent again unnamed.
 *
 * @param error - what a query threw
 */
function isStatementNameError(error: unknown): boolean {
  const state = sqlState(error);
  return state === DUPLICATE_PREPARED_STATEMENT || state === INVALID_SQL_STATEMENT_NAME;
}

// Statement names must differ wherever two connections may share a server session: behind a
// pooler, a name another client parsed there with another text (another version of this library,
// another process's table) would otherwise run that text with our values. A random tag per process
// separates processes; a counter per client connection separates the connections of one process.
// Stores of one process over one connection share names (and so their parsed statements), so
// building many stores does not pile statements up on a connection.
// Drawn on first use, not at load: workerd refuses random values in a module's global scope.
let tagOfProcess: string | undefined;
const processTag = () => {
  tagOfProcess ??= randomBytes(4).toString('hex');
  return tagOfProcess;
};
let connectionCount = 0;
const connectionTags = new WeakMap<object, string>();

function connectionTag(connection: object): string {
  let tag = connectionTags.get(connection);
  if (tag === undefined) {
    tag = `${processTag()}${(connectionCount++).toString(36)}`;
    connectionTags.set(connection, tag);
  }
  return tag;
}

/** Runs one compiled query with its placeholder values and resolves to its rows. */
export type PgStatement<K extends string, R> = (values: Readonly<Record<K, unknown>>) => Promise<R>;

// The one method of a node-postgres `Pool`, `Client` or `PoolClient` the store calls: a query
// config naming the statement, which all three accept and which makes the server parse the
// statement once per connection.
interface NodePgQueryable {
  query(config: {
    name?: string;
    text: string;
    values: unknown[];
    types: typeof STORE_TYPES;
  }): Promise<{ rows: unknown[] }>;
}

// A notice as node-postgres reports it.
interface NodePgNotice {
  readonly code?: string;
  readonly message?: string;
}

// A node-postgres `Pool`: its `query` takes any idle client, so a statement name that depends on
// the client needs the client checked out first, and so do the notices of one statement.
interface NodePgPool extends NodePgQueryable {
  readonly idleCount: number;
  connect(): Promise<
    NodePgQueryable & {
      release(error?: Error): void;
      once(event: 'error', listener: (error: Error) => void): unknown;
      on(event: 'notice', listener: (notice: NodePgNotice) => void): unknown;
      removeListener(event: 'error' | 'notice', listener: (value: never) => void): unknown;
    }
  >;
}

// The server's only sign that a commit was not confirmed by the synchronous standby it waited for:
// a cancelled wait still reports success, with this warning.
const cancelledSyncWait = (notice: NodePgNotice) =>
  notice.code === '01000' &&
  /canceling wait for synchronous replication/i.test(notice.message ?? '');

function isPool(client: NodePgQueryable): client is NodePgPool {
  return 'idleCount' in client && typeof (client as { connect?: unknown }).connect === 'function';
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
 * Prepares a drizzle query for a store in `mode`: named `name` (with this process's tag) while
 * `mode.named` holds, unnamed otherwise. A run the server refuses by name (see
 * {@link isStatementNameError}) never ran: it is sent again unnamed, and `mode.named` is turned
 * off, so the store stops naming statements the server cannot keep.
 *
 * @param name - the statement's name, unique per SQL text within the process
 * @param query - a drizzle query
 * @param mode - the store's statement mode, see {@link PgStatementMode}
 */
export function preparePgQuery<R>(
  name: string,
  query: PgQuery<R>,
  mode: PgStatementMode,
): PgPrepared<R> {
  const named = query.prepare(`${name}_${processTag()}`);
  const unnamed = query.prepare(undefined);
  return {
    execute: async (values) => {
      if (!mode.named) return unnamed.execute(values);
      try {
        return await named.execute(values);
      } catch (error) {
        if (!isStatementNameError(error)) throw error;
        mode.named = false;
        return unnamed.execute(values);
      }
    },
  };
}

// Runs one statement on a client checked out of `pool`, so that the notices heard there are its
// own: a write whose synchronous replication wait was cancelled is refused, not reported done.
async function onCheckedOutClient<R>(
  pool: NodePgPool,
  statement: string,
  run: (client: NodePgQueryable, tag: string) => Promise<R>,
): Promise<R> {
  const client = await pool.connect();
  let failure: Error | undefined;
  let unconfirmed = false;
  // As `Pool.query` does: a connection error while the client is checked out fails the query
  // instead of reaching the client's `error` event, and a failed client is not reused.
  const onError = (error: Error) => {
    failure = error;
  };
  const onNotice = (notice: NodePgNotice) => {
    if (cancelledSyncWait(notice)) unconfirmed = true;
  };
  client.once('error', onError);
  client.on('notice', onNotice);
  try {
    const rows = await run(client, connectionTag(client));
    if (unconfirmed) throw new ReplicationUnconfirmedError(statement);
    return rows;
  } catch (error) {
    if (!(error instanceof ReplicationUnconfirmedError)) {
      failure = error instanceof Error ? error : new Error(String(error));
    }
    throw error;
  } finally {
    client.removeListener('error', onError);
    client.removeListener('notice', onNotice);
    client.release(failure);
  }
}

/**
 * Compiles a drizzle query once into a function that runs it as a statement named `name` (see
 * {@link PgStatementMode}: named per connection while `mode.named` holds, unnamed otherwise). Over
 * a node-postgres database (see {@link directNodePgClient}) the statement goes straight to the
 * driver with drizzle's own SQL text, and its rows come back as the driver reads them: the
 * per-call placeholder filling and row mapping of drizzle's prepared queries are skipped; a named
 * statement then carries a tag of the client connection it runs on. Every other driver (PGlite,
 * postgres-js, a transaction, …) runs drizzle's prepared query (see {@link preparePgQuery}).
 *
 * Either way, a run the server refuses by name never ran: it is sent again unnamed, and the
 * store's `mode.named` is turned off.
 *
 * The query's placeholders must be exactly `names`, so a query whose parameters drift fails here,
 * when the store is built, instead of sending a value as NULL. Its selected or returned fields
 * must carry their columns' names, so both paths give rows of the same shape.
 *
 * @param db - the drizzle database the query was built on
 * @param name - the prepared statement's name, unique per SQL text
 * @param query - a drizzle query whose parameters are placeholders or fixed values
 * @param names - the names of the query's placeholders
 * @param mode - the store's statement mode
 * @throws Error when the query's placeholders are not exactly `names`
 */
export function compilePgStatement<K extends string, R>(
  db: AnyPgDatabase,
  name: string,
  query: PgQuery<R>,
  names: readonly K[],
  mode: PgStatementMode,
): PgStatement<K, R> {
  const { sql: text, slots } = compileSlots(query, names);
  const client = directNodePgClient(db);
  if (client === undefined) {
    const prepared = preparePgQuery(name, query, mode);
    return (values) => prepared.execute(values);
  }
  const bind = (values: Readonly<Record<K, unknown>>) => {
    const record = values as Readonly<Record<string, unknown>>;
    return slots.map((slot) => ('name' in slot ? record[slot.name] : slot.value));
  };
  const unnamed = async (on: NodePgQueryable, values: unknown[]) =>
    (await on.query({ text, values, types: STORE_TYPES })).rows as R;
  const named = async (on: NodePgQueryable, tag: string, values: unknown[]) => {
    try {
      return (await on.query({ name: `${name}_${tag}`, text, values, types: STORE_TYPES }))
        .rows as R;
    } catch (error) {
      if (!isStatementNameError(error)) throw error;
      mode.named = false;
      return unnamed(on, values);
    }
  };
  if (isPool(client)) {
    return (values) =>
      onCheckedOutClient(client, name, (checkedOut, tag) =>
        mode.named ? named(checkedOut, tag, bind(values)) : unnamed(checkedOut, bind(values)),
      );
  }
  return (values) =>
    mode.named ? named(client, connectionTag(client), bind(values)) : unnamed(client, bind(values));
}
