import {
  boolean,
  customType,
  double,
  index,
  int,
  mysqlTable,
  varchar,
} from 'drizzle-orm/mysql-core';
import { InvalidOptionError } from '../core/errors.js';
import type { KeyStatus } from '../core/status.js';

/** The table name the store uses when none is given. */
export const DEFAULT_MYSQL_TABLE = 'keys';

/**
 * The most UTF-8 bytes an `id` (the key) or a `fingerprint` holds on MySQL. Enough for any key of
 * 255 characters (the HTTP layer's limit) in any script. Longer ones are refused by the store with
 * a typed error before they reach the server, so no `sql_mode` can truncate them.
 */
export const MYSQL_MAX_TEXT_BYTES = 1024;

// The longest table name whose derived names (its index, its migrations journal) still fit
// MySQL's 64-character identifiers.
const MAX_TABLE_NAME = 38;

// Keys and fingerprints are compared and ordered as bytes. VARBINARY is the one type that does
// so on MySQL and MariaDB alike: the `utf8mb4_bin` collation is PAD SPACE on MariaDB (so 'k' and
// 'k ' would be one key) and the NO PAD ones have different names on each server. The driver
// reads VARBINARY as a Buffer; the store only ever writes well-formed UTF-8, so decoding it gives
// back the exact string.
const utf8Bytes = customType<{ data: string; driverData: Buffer | string }>({
  dataType: () => `varbinary(${MYSQL_MAX_TEXT_BYTES})`,
  fromDriver: (value) => (typeof value === 'string' ? value : value.toString('utf8')),
});

// The stored answer, as UTF-8 whatever the table's default character set (often latin1), and up
// to 4 GiB: the server's max_allowed_packet refuses larger ones loudly.
const answerText = customType<{ data: string; driverData: string }>({
  dataType: () => 'longtext CHARACTER SET utf8mb4 COLLATE utf8mb4_bin',
});

/**
 * Asserts that `name` can name the keys table on MySQL: a letter or underscore, then letters,
 * digits or underscores, at most 38 characters, so that the index and the migrations journal
 * derived from it fit MySQL's 64-character identifiers.
 *
 * @throws {@link InvalidOptionError} otherwise
 */
export function assertMysqlTableName(name: unknown): asserts name is string {
  if (
    typeof name !== 'string' ||
    !/^[A-Za-z_][A-Za-z0-9_]*$/.test(name) ||
    name.length > MAX_TABLE_NAME
  ) {
    throw new InvalidOptionError(
      `table must be a letter or underscore followed by letters, digits or underscores, at most ${MAX_TABLE_NAME} characters, got ${
        typeof name === 'string' ? JSON.stringify(name.slice(0, 80)) : typeof name
      }`,
    );
  }
}

/** The name of the retention index of the table `name`. */
export function mysqlRetentionIndexName(name: string): string {
  return `${name}_status_expires_id_idx`;
}

/**
 * Builds the keys table under `name` (default `keys`): the contract's five columns plus the lease
 * columns, `id` and `fingerprint` compared as bytes, `expires` a DOUBLE, the answer in a
 * LONGTEXT, and the retention index on `(status, expires, id)` named after the table so two
 * tables never clash.
 *
 * @param name - the table's name; see {@link assertMysqlTableName}
 * @throws {@link InvalidOptionError} for a name MySQL cannot hold with its derived names
 * @example
 * ```ts
 * import { mysqlKeysTable } from 'drizzle-idempotency/mysql';
 * export const idempotencyKeys = mysqlKeysTable('idempotency_keys');
 * ```
 */
export function mysqlKeysTable(name: string = DEFAULT_MYSQL_TABLE) {
  assertMysqlTableName(name);
  return mysqlTable(
    name,
    {
      id: utf8Bytes('id').primaryKey(),
      fingerprint: utf8Bytes('fingerprint').notNull(),
      status: varchar('status', { length: 7 }).$type<KeyStatus>().notNull(),
      response: answerText('response'),
      // DOUBLE, never FLOAT: a FLOAT would round 16777217 to 16777216.
      expires: double('expires').notNull(),
      // The pending owner's lease deadline on the caller's clock; NULL means no lease.
      leaseUntil: double('lease_until'),
      // The fencing token: every owner's write requires it, a takeover bumps it.
      attempt: int('attempt').notNull().default(1),
      // The handler ran but its answer was not recorded: never retried automatically.
      unrecorded: boolean('unrecorded').notNull().default(false),
    },
    (t) => [index(mysqlRetentionIndexName(name)).on(t.status, t.expires, t.id)],
  );
}

/** The type of a keys table built by {@link mysqlKeysTable}, whatever its name. */
export type MysqlKeysTable = ReturnType<typeof mysqlKeysTable>;

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
