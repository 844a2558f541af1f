// Each from its own module, not the `drizzle-orm/mysql-core` barrel: esbuild, bundling a Worker
// (wrangler), wraps these modules for the lazily imported drizzle-orm/mysql2 and, drizzle-orm
// being marked side-effect free, reads the barrel's re-exports before they initialise, so the
// table below failed at load ("MySqlCustomColumnBuilder is not a constructor").

// Types only, erased from the build: the barrel is safe to name here.
import type { MySqlColumn, MySqlTableWithColumns } from 'drizzle-orm/mysql-core';
import { bigint } from 'drizzle-orm/mysql-core/columns/bigint';
import { boolean } from 'drizzle-orm/mysql-core/columns/boolean';
import { customType } from 'drizzle-orm/mysql-core/columns/custom';
import { double } from 'drizzle-orm/mysql-core/columns/double';
import { varchar } from 'drizzle-orm/mysql-core/columns/varchar';
import { index } from 'drizzle-orm/mysql-core/indexes';
import { mysqlTable } from 'drizzle-orm/mysql-core/table';
import { getTableConfig } from 'drizzle-orm/mysql-core/utils';
import type { ColumnConfig, ColumnFacts } from '../core/drizzle-types.js';
import type { KeyStatus } from '../core/status.js';
import { assertTableName, DEFAULT_TABLE_NAME, retentionIndexName } from '../core/table-name.js';
import { MAX_KEY_BYTES } from '../core/validation.js';

/**
 * The most UTF-8 bytes an `id` (the key) or a `fingerprint` holds on MySQL: `MAX_KEY_BYTES`, the
 * limit every dialect enforces. Enough for any key of 255 characters (the HTTP layer's limit) in
 * any script. Longer ones are refused by every store with a typed error before they reach the
 * server, so no `sql_mode` can truncate them.
 */
export const MYSQL_MAX_TEXT_BYTES = MAX_KEY_BYTES;

// Keys and fingerprints are compared and ordered as bytes. VARBINARY is the one type that does
// so on MySQL and MariaDB alike: the `utf8mb4_bin` collation is PAD SPACE on MariaDB (so 'k' and
// 'k ' would be one key) and the NO PAD ones have different names on each server. The driver
// reads VARBINARY as bytes (mysql2 a Buffer, PlanetScale's serverless driver a plain Uint8Array,
// whose toString would list the numbers); the store only ever writes well-formed UTF-8, so
// decoding the bytes gives back the exact string.
const utf8 = new TextDecoder();
const utf8Bytes = customType<{ data: string; driverData: Uint8Array | string }>({
  dataType: () => `varbinary(${MYSQL_MAX_TEXT_BYTES})`,
  fromDriver: (value) => (typeof value === 'string' ? value : utf8.decode(value)),
});

// The stored answer, as UTF-8 whatever the table's default character set (often latin1), and up
// to 4 GiB: the server's max_allowed_packet refuses larger ones loudly.
const answerText = customType<{ data: string; driverData: string }>({
  dataType: () => 'longtext CHARACTER SET utf8mb4 COLLATE utf8mb4_bin',
});

/**
 * Builds the keys table on MySQL under `name` (default `keys`): the contract's five columns plus
 * the lease columns, `id` and `fingerprint` compared as bytes, `expires` a DOUBLE, the answer in a
 * LONGTEXT, and the retention index on `(status, expires, id)` named after the table
 * (`<name>_status_expires_id_idx`) so two tables never clash. Export it from your drizzle-kit
 * schema if you keep your own migrations, and give it to the store as `{ table }`.
 *
 * @param name - the table's name: letters, digits and underscores, at most 38; default `keys`
 * @throws {@link InvalidOptionError} for a name the library cannot use
 * @example
 * ```ts
 * import { mysqlKeysTable } from 'drizzle-idempotency/mysql';
 * export const idempotencyKeys = mysqlKeysTable('idempotency_keys');
 * ```
 */
export function mysqlKeysTable<const N extends string = typeof DEFAULT_TABLE_NAME>(
  name: N = DEFAULT_TABLE_NAME as N,
): MysqlKeysTable<N> {
  assertTableName(name);
  const table = mysqlTable(name, mysqlKeysColumns(), (t) => [
    index(retentionIndexName(name)).on(t.status, t.expires, t.id),
  ]);
  // The declared type is written out (see MysqlKeysTable); test/types/table-types.test.ts checks
  // that it reads and writes the rows drizzle infers from the columns above.
  return table as unknown as MysqlKeysTable<N>;
}

/** The columns of the keys table on MySQL, as {@link mysqlKeysTable} builds them. */
export function mysqlKeysColumns() {
  return {
    id: utf8Bytes('id').primaryKey(),
    fingerprint: utf8Bytes('fingerprint').notNull(),
    status: varchar('status', { length: 7 }).$type<KeyStatus>().notNull(),
    response: answerText('response'),
    // DOUBLE, never FLOAT: a FLOAT would round 16777217 to 16777216.
    expires: double('expires').notNull(),
    // The pending owner's lease deadline on the caller's clock; NULL means no lease.
    leaseUntil: double('lease_until'),
    // The fencing token of the row's ownership: every owner's write requires it, a takeover
    // raises it (see nextFencingToken); bigint, since tokens are 2^52 and up.
    attempt: bigint('attempt', { mode: 'number' }).notNull().default(1),
    // The handler ran but its answer was not recorded: never retried automatically.
    unrecorded: boolean('unrecorded').notNull().default(false),
    // The recorded steps of the key's handler (see docs/steps.md): a JSON object of step name
    // to stored result, NULL until the first step. Kept in the key's row so it goes with the key.
    steps: answerText('steps'),
  };
}

/** A column of a MySQL table named `TableName`, in the form drizzle 0.45 and 1.0 both accept. */
type MysqlColumnOf<TableName extends string, Facts extends ColumnFacts> = MySqlColumn<
  ColumnConfig<TableName, Facts>
>;

type Bytes<Name extends string, PrimaryKey extends boolean> = {
  name: Name;
  dataType: 'custom';
  columnType: 'MySqlCustomColumn';
  data: string;
  driverParam: string | Uint8Array;
  notNull: true;
  hasDefault: false;
  isPrimaryKey: PrimaryKey;
  enumValues: undefined;
};

type Answer<Name extends string> = {
  name: Name;
  dataType: 'custom';
  columnType: 'MySqlCustomColumn';
  data: string;
  driverParam: string;
  notNull: false;
  hasDefault: false;
  isPrimaryKey: false;
  enumValues: undefined;
};

type Double<Name extends string, NotNull extends boolean> = {
  name: Name;
  dataType: 'number';
  columnType: 'MySqlDouble';
  data: number;
  driverParam: string | number;
  notNull: NotNull;
  hasDefault: false;
  isPrimaryKey: false;
  enumValues: undefined;
};

/** The columns of a keys table named `N` on MySQL, as {@link mysqlKeysTable} builds them. */
type MysqlKeysColumns<N extends string> = {
  id: MysqlColumnOf<N, Bytes<'id', true>>;
  fingerprint: MysqlColumnOf<N, Bytes<'fingerprint', false>>;
  status: MysqlColumnOf<
    N,
    {
      name: 'status';
      dataType: 'string';
      columnType: 'MySqlVarChar';
      data: KeyStatus;
      driverParam: string | number;
      notNull: true;
      hasDefault: false;
      isPrimaryKey: false;
      enumValues: [string, ...string[]];
    }
  >;
  response: MysqlColumnOf<N, Answer<'response'>>;
  expires: MysqlColumnOf<N, Double<'expires', true>>;
  leaseUntil: MysqlColumnOf<N, Double<'lease_until', false>>;
  attempt: MysqlColumnOf<
    N,
    {
      name: 'attempt';
      dataType: 'number';
      columnType: 'MySqlBigInt53';
      data: number;
      driverParam: string | number;
      notNull: true;
      hasDefault: true;
      isPrimaryKey: false;
      enumValues: undefined;
    }
  >;
  unrecorded: MysqlColumnOf<
    N,
    {
      name: 'unrecorded';
      dataType: 'boolean';
      columnType: 'MySqlBoolean';
      data: boolean;
      driverParam: number | boolean;
      notNull: true;
      hasDefault: true;
      isPrimaryKey: false;
      enumValues: undefined;
    }
  >;
  steps: MysqlColumnOf<N, Answer<'steps'>>;
};

/**
 * A keys table built by {@link mysqlKeysTable}, named `N` (any name by default). Written out
 * rather than inferred from drizzle's builders: the inferred type names 0.45's column generics,
 * which drizzle 1.0 changed, and the published declarations must typecheck under both.
 */
export type MysqlKeysTable<N extends string = string> = MySqlTableWithColumns<{
  name: N;
  schema: undefined;
  columns: MysqlKeysColumns<N>;
  dialect: 'mysql';
  isAlias: false;
}>;

/** Options naming the keys table of a store, of the migrations or of the adoption check. */
export interface MysqlTableOptions {
  /** The keys table, from `mysqlKeysTable(name)`. Default: the `keys` table. */
  readonly table?: MysqlKeysTable;
}

/** The keys table the options point at, and its name. */
export function resolveMysqlTable(options: MysqlTableOptions): {
  readonly table: MysqlKeysTable;
  readonly name: string;
} {
  if (options.table === undefined) return { table: keys, name: DEFAULT_TABLE_NAME };
  return { table: options.table, name: getTableConfig(options.table).name };
}

/**
 * The `keys` table. Import it into your own drizzle-kit schema if you keep your own migrations.
 *
 * @example
 * ```ts
 * import { keys } from 'drizzle-idempotency/mysql';
 * export { keys };
 * ```
 */
export const keys = mysqlKeysTable();
