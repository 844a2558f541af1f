import { type Column, sql } from 'drizzle-orm';
import type * as pgCore from 'drizzle-orm/pg-core';
import {
  bigint,
  boolean,
  customType,
  doublePrecision,
  getTableConfig,
  index,
  type PgTable,
  type PgTableFn,
  type PgTableWithColumns,
  pgSchema,
  pgTable,
  text,
} from 'drizzle-orm/pg-core';
import type { ClassOf, ColumnConfig, ColumnFacts } from '../core/drizzle-types.js';
import { InvalidOptionError } from '../core/errors.js';
import type { KeyStatus } from '../core/status.js';
import {
  assertTableName,
  DEFAULT_TABLE_NAME,
  doneIdIndexName,
  retentionIndexName,
} from '../core/table-name.js';
import { assertSchemaName } from './identifier.js';

/** The schema the store uses when none is given. */
export const DEFAULT_PG_SCHEMA = 'public';

// Keys must sort in byte order (UTF-8 code points), exactly as SQLite's BINARY collation does:
// `expired` and `purge` return ids ascending, and the database's default collation (en_US, …)
// would order them by language rules instead. The "C" collation also makes every comparison in
// the primary key and the retention index a plain memcmp.
const byteOrderText = customType<{ data: string; driverData: string }>({
  dataType: () => 'text COLLATE "C"',
});

/** The columns of the keys table on PostgreSQL, shared by {@link pgKeysTable} and the push tables. */
export function pgKeysColumns() {
  return {
    id: byteOrderText('id').primaryKey(),
    fingerprint: text('fingerprint').notNull(),
    status: text('status').$type<KeyStatus>().notNull(),
    response: text('response'),
    // `real` is float4 in PostgreSQL (16777217 would come back as 16777216).
    expires: doublePrecision('expires').notNull(),
    // The lease of a pending owner (see LeasedIdempotencyStore): NULL for rows without one.
    leaseUntil: doublePrecision('lease_until'),
    // The fencing token of the row's ownership (see nextFencingToken): bigint, since tokens are
    // 2^52 and up.
    attempt: bigint('attempt', { mode: 'number' }).notNull().default(1),
    unrecorded: boolean('unrecorded').notNull().default(false),
    // The recorded steps of the key's handler (see docs/steps.md): a JSON object of step name to
    // stored result, NULL until the first step. Kept in the key's row so it goes with the key.
    steps: text('steps'),
  };
}

/** Where {@link pgKeysTable} builds the keys table, besides its name. */
export interface PgKeysTableSchemaOptions {
  /** The PostgreSQL schema holding it. Default `public`. */
  readonly schema?: string;
}

/**
 * Checks the arguments of {@link pgKeysTable} and `pgPushTables`, `(name, { schema })`, before
 * either is read: a JavaScript caller can pass anything.
 *
 * @throws {@link InvalidOptionError} for arguments of another form
 */
export function assertPgTablePlace(
  caller: string,
  name: unknown,
  options: unknown,
): asserts name is string | undefined {
  if (
    typeof options !== 'object' ||
    options === null ||
    !(name === undefined || typeof name === 'string')
  ) {
    throw new InvalidOptionError(`${caller} takes (name, { schema })`);
  }
}

/**
 * Builds the keys table `name` in `options.schema`: exactly the columns of the contract plus the
 * lease columns, `id` in the byte-order "C" collation, and the retention index on
 * `(status, expires, id)`, named after the table (`<name>_status_expires_id_idx`) so two tables
 * never clash. Export it from your drizzle-kit schema if you keep your own migrations, and give it
 * to the store as `{ table }`.
 *
 * @param name - the table's name: letters, digits and underscores, at most 38; default `keys`
 * @param options - the schema holding it; default `public`
 * @throws {@link InvalidOptionError} for a name or schema the library cannot use
 * @example
 * ```ts
 * import { pgKeysTable } from 'drizzle-idempotency/pg';
 * export const idempotencyKeys = pgKeysTable('idempotency_keys', { schema: 'billing' });
 * ```
 */
export function pgKeysTable(name?: string, options: PgKeysTableSchemaOptions = {}): PgKeysTable {
  assertPgTablePlace('pgKeysTable', name, options);
  const tableName = name ?? DEFAULT_TABLE_NAME;
  const schema = options.schema ?? DEFAULT_PG_SCHEMA;
  assertTableName(tableName);
  assertSchemaName(schema);
  // drizzle refuses pgSchema('public'): tables of the default schema are built with pgTable.
  // Both builders make the same table; only the type of its `schema` differs.
  const table = (schema === DEFAULT_PG_SCHEMA ? pgTable : pgSchema(schema).table) as PgTableFn<
    string | undefined
  >;
  const built = table(tableName, pgKeysColumns(), (t) => [
    index(retentionIndexName(tableName)).on(t.status, t.expires, t.id),
    // Done rows in id order with their deadlines: a purge of a large backlog walks it from the
    // lowest id, checking `expires` in the index, instead of sorting the whole backlog. Partial,
    // so a reserve (a pending row) never writes to it.
    index(doneIdIndexName(tableName)).on(t.id, t.expires).where(sql`status = 'done'`),
  ]);
  // The declared type is written out (see PgKeysTable); test/types/table-types.test.ts checks
  // that it reads and writes the rows drizzle infers from the columns.
  return built as unknown as PgKeysTable;
}

/**
 * A column of a PostgreSQL table, in the form drizzle 0.45 and 1.0 both accept. `PgColumn`'s
 * generics differ between the two (1.0 puts the data type first), so this is drizzle's own
 * `Column` with what the installed major's `PgColumn` adds to it: in 0.45 the `pg` dialect in its
 * type configuration and its table, a `PgTable`; in 1.0 its array dimensions and `toBuilder`.
 * Either major's query builders take it as a `PgColumn`.
 */
export type PgColumnOf<Facts extends ColumnFacts> = Column<
  ColumnConfig<string, Facts> & { dialect: 'pg' }
> & { readonly table: PgTable } & Omit<ClassOf<typeof pgCore, ['PgColumn']>, keyof Column>;

type PgTextFacts<Name extends string, Data, NotNull extends boolean> = {
  name: Name;
  dataType: 'string';
  columnType: 'PgText';
  data: Data;
  driverParam: string;
  notNull: NotNull;
  hasDefault: false;
  isPrimaryKey: false;
  enumValues: [string, ...string[]];
};

type PgDoubleFacts<Name extends string, NotNull extends boolean> = {
  name: Name;
  dataType: 'number';
  columnType: 'PgDoublePrecision';
  data: number;
  driverParam: string | number;
  notNull: NotNull;
  hasDefault: false;
  isPrimaryKey: false;
  enumValues: undefined;
};

/** The columns of a keys table on PostgreSQL, `id` left to the table (see {@link pgKeysColumns}). */
export type PgKeysDataColumns = {
  fingerprint: PgColumnOf<PgTextFacts<'fingerprint', string, true>>;
  status: PgColumnOf<PgTextFacts<'status', KeyStatus, true>>;
  response: PgColumnOf<PgTextFacts<'response', string, false>>;
  expires: PgColumnOf<PgDoubleFacts<'expires', true>>;
  leaseUntil: PgColumnOf<PgDoubleFacts<'lease_until', false>>;
  attempt: PgColumnOf<{
    name: 'attempt';
    dataType: 'number';
    columnType: 'PgBigInt53';
    data: number;
    driverParam: string | number;
    notNull: true;
    hasDefault: true;
    isPrimaryKey: false;
    enumValues: undefined;
  }>;
  unrecorded: PgColumnOf<{
    name: 'unrecorded';
    dataType: 'boolean';
    columnType: 'PgBoolean';
    data: boolean;
    driverParam: boolean;
    notNull: true;
    hasDefault: true;
    isPrimaryKey: false;
    enumValues: undefined;
  }>;
  steps: PgColumnOf<PgTextFacts<'steps', string, false>>;
};

/**
 * The type of a keys table built by {@link pgKeysTable}, whatever its name and schema. Written
 * out rather than inferred from drizzle's builders: the inferred type names 0.45's column
 * generics, which drizzle 1.0 changed, and the published declarations must typecheck under both.
 */
export type PgKeysTable = PgTableWithColumns<{
  name: string;
  schema: string | undefined;
  columns: PgKeysDataColumns & {
    id: PgColumnOf<{
      name: 'id';
      dataType: 'custom';
      columnType: 'PgCustomColumn';
      data: string;
      driverParam: string;
      notNull: true;
      hasDefault: false;
      isPrimaryKey: true;
      enumValues: undefined;
    }>;
  };
  dialect: 'pg';
  isAlias: false;
}>;

/**
 * The `keys` table in the `public` schema. Import it into your own drizzle-kit schema if you keep
 * your own migrations.
 *
 * @example
 * ```ts
 * import { keys } from 'drizzle-idempotency/pg';
 * const rows = await db.select().from(keys).where(eq(keys.status, 'done'));
 * ```
 */
export const keys = pgKeysTable();

/**
 * The key row's columns under their own names, for a select: drizzle's path and a statement run
 * directly then give rows of one shape.
 *
 * @param keys - the keys table
 */
export function keyRowColumns(keys: PgKeysTable) {
  return {
    id: keys.id,
    fingerprint: keys.fingerprint,
    status: keys.status,
    response: keys.response,
    expires: keys.expires,
    lease_until: keys.leaseUntil,
    attempt: keys.attempt,
    unrecorded: keys.unrecorded,
  };
}

/** How a store or the migrations find their keys table: a schema, or the table itself. */
export interface PgTableOptions {
  /**
   * The PostgreSQL schema holding the `keys` table, created by the migrations if missing. Default
   * `public`. With `table`, it may be left out; if given, it must be the table's schema.
   */
  readonly schema?: string;
  /** The keys table, from `pgKeysTable(name, { schema })`. Default: `keys` in `schema`. */
  readonly table?: PgKeysTable;
}

/** The keys table, its name and its schema, resolved from {@link PgTableOptions}. */
export interface ResolvedPgTable {
  readonly table: PgKeysTable;
  readonly name: string;
  readonly schema: string;
}

/**
 * Resolves the keys table of a store or of the migrations.
 *
 * @throws {@link InvalidOptionError} for a bad schema name, or a `schema` that is not the table's
 */
export function resolvePgTable(options: PgTableOptions): ResolvedPgTable {
  if (options.table === undefined) {
    const schema = options.schema ?? DEFAULT_PG_SCHEMA;
    assertSchemaName(schema);
    return { table: pgKeysTable(DEFAULT_TABLE_NAME, { schema }), name: DEFAULT_TABLE_NAME, schema };
  }
  const config = getTableConfig(options.table);
  const schema = config.schema ?? DEFAULT_PG_SCHEMA;
  if (options.schema !== undefined && options.schema !== schema) {
    throw new InvalidOptionError(
      `schema is ${JSON.stringify(options.schema)} but the table is in ${JSON.stringify(schema)}: give one or the other`,
    );
  }
  return { table: options.table, name: config.name, schema };
}
