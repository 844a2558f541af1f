import { sql } from 'drizzle-orm';
import {
  index,
  integer,
  real,
  type SQLiteColumn,
  type SQLiteTableWithColumns,
  sqliteTable,
  text,
} from 'drizzle-orm/sqlite-core';
import type { ColumnConfig, ColumnFacts } from '../core/drizzle-types.js';
import type { KeyStatus } from '../core/status.js';
import {
  assertTableName,
  DEFAULT_TABLE_NAME,
  doneIdIndexName,
  retentionIndexName,
} from '../core/table-name.js';

/**
 * Builds the keys table on SQLite under `name`: exactly the columns of the contract plus the lease
 * columns, and the retention index on `(status, expires, id)`, named after the table
 * (`<name>_status_expires_id_idx`) so two tables never clash. Export it from your drizzle-kit
 * schema if you keep your own migrations, and give it to the store as `{ table }`.
 *
 * The index covers retention: `status = 'done' AND expires <= now` is one range scan of it, and
 * walking it in order lets a sweep delete a backlog in linear time.
 *
 * @param name - the table's name: letters, digits and underscores, at most 38; default `keys`
 * @throws {@link InvalidOptionError} for a name the library cannot use
 * @example
 * ```ts
 * import { sqliteKeysTable } from 'drizzle-idempotency/sqlite';
 * export const idempotencyKeys = sqliteKeysTable('idempotency_keys');
 * ```
 */
export function sqliteKeysTable<const N extends string = typeof DEFAULT_TABLE_NAME>(
  name: N = DEFAULT_TABLE_NAME as N,
): SqliteKeysTable<N> {
  assertTableName(name);
  const table = sqliteTable(name, sqliteKeysColumns(), (table) => [
    index(retentionIndexName(name)).on(table.status, table.expires, table.id),
    // Done rows in id order, with their deadlines: a purge of a large backlog walks it from the
    // lowest id and stops at its limit, instead of sorting the whole backlog. Partial, so a
    // reserve (a pending row) never writes to it.
    index(doneIdIndexName(name)).on(table.id, table.expires).where(sql`status = 'done'`),
  ]);
  // The declared type is written out (see SqliteKeysTable); test/types/table-types.test.ts checks
  // that it reads and writes the rows drizzle infers from the columns above.
  return table as unknown as SqliteKeysTable<N>;
}

/** The columns of the keys table on SQLite, shared by {@link sqliteKeysTable} and the push tables. */
export function sqliteKeysColumns() {
  return {
    id: text('id').primaryKey(),
    fingerprint: text('fingerprint').notNull(),
    status: text('status').$type<KeyStatus>().notNull(),
    response: text('response'),
    expires: real('expires').notNull(),
    // The lease of a pending owner (see LeasedIdempotencyStore): NULL for rows without one.
    leaseUntil: real('lease_until'),
    // The fencing token of the row's ownership (see nextFencingToken); a takeover raises it.
    // INTEGER is 64-bit in SQLite, wide enough for tokens of 2^52 and up.
    attempt: integer('attempt').notNull().default(1),
    unrecorded: integer('unrecorded', { mode: 'boolean' }).notNull().default(false),
    // The recorded steps of the key's handler (see docs/steps.md): a JSON object of step name to
    // stored result, NULL until the first step. Kept in the key's row so it goes with the key.
    steps: text('steps'),
  };
}

type Text<
  Name extends string,
  Data,
  NotNull extends boolean,
  PrimaryKey extends boolean = false,
> = {
  name: Name;
  dataType: 'string';
  columnType: 'SQLiteText';
  data: Data;
  driverParam: string;
  notNull: NotNull;
  hasDefault: false;
  isPrimaryKey: PrimaryKey;
  enumValues: [string, ...string[]];
};

type Real<Name extends string, NotNull extends boolean> = {
  name: Name;
  dataType: 'number';
  columnType: 'SQLiteReal';
  data: number;
  driverParam: number;
  notNull: NotNull;
  hasDefault: false;
  isPrimaryKey: false;
  enumValues: undefined;
};

/** A column of a SQLite table named `TableName`, in the form drizzle 0.45 and 1.0 both accept. */
export type SqliteColumnOf<TableName extends string, Facts extends ColumnFacts> = SQLiteColumn<
  ColumnConfig<TableName, Facts>
>;

/** The columns of a keys table named `N` on SQLite, as {@link sqliteKeysColumns} builds them. */
type SqliteKeysColumns<N extends string> = {
  id: SqliteColumnOf<N, Text<'id', string, true, true>>;
  fingerprint: SqliteColumnOf<N, Text<'fingerprint', string, true>>;
  status: SqliteColumnOf<N, Text<'status', KeyStatus, true>>;
  response: SqliteColumnOf<N, Text<'response', string, false>>;
  expires: SqliteColumnOf<N, Real<'expires', true>>;
  leaseUntil: SqliteColumnOf<N, Real<'lease_until', false>>;
  attempt: SqliteColumnOf<
    N,
    {
      name: 'attempt';
      dataType: 'number';
      columnType: 'SQLiteInteger';
      data: number;
      driverParam: number;
      notNull: true;
      hasDefault: true;
      isPrimaryKey: false;
      enumValues: undefined;
    }
  >;
  unrecorded: SqliteColumnOf<
    N,
    {
      name: 'unrecorded';
      dataType: 'boolean';
      columnType: 'SQLiteBoolean';
      data: boolean;
      driverParam: number;
      notNull: true;
      hasDefault: true;
      isPrimaryKey: false;
      enumValues: undefined;
    }
  >;
  steps: SqliteColumnOf<N, Text<'steps', string, false>>;
};

/**
 * A keys table built by {@link sqliteKeysTable}, named `N` (any name by default). Written out
 * rather than inferred from drizzle's builders: the inferred type names 0.45's column generics,
 * which drizzle 1.0 changed, and the published declarations must typecheck under both.
 */
export type SqliteKeysTable<N extends string = string> = SQLiteTableWithColumns<{
  name: N;
  schema: undefined;
  columns: SqliteKeysColumns<N>;
  dialect: 'sqlite';
  isAlias: false;
}>;

/**
 * The default keys table, named `keys`. Import it into your own drizzle-kit schema if you keep
 * your own migrations.
 *
 * @example
 * ```ts
 * import { keys } from 'drizzle-idempotency/sqlite';
 * const pending = db.select().from(keys).where(eq(keys.status, 'pending')).all();
 * ```
 */
export const keys = sqliteKeysTable();
