import { InvalidOptionError } from './errors.js';

/** The name of the table every store uses unless it is given another. */
export const DEFAULT_TABLE_NAME = 'keys';

/**
 * drizzle's own migrations journal. drizzle-idempotency 0.1.0 recorded its migrations there; it is
 * only ever read, to carry those records over to the library's own journal once.
 */
export const LEGACY_MIGRATIONS_TABLE = '__drizzle_migrations';

const JOURNAL_PREFIX = '__idempotency_migrations';
const INDEX_SUFFIX = '_status_expires_id_idx';

// The longest derived name (`__idempotency_migrations_<name>`) must fit PostgreSQL's 63-byte
// identifiers, which silently truncates longer ones and would make two tables' names collide.
const MAX_TABLE_NAME_LENGTH = 63 - JOURNAL_PREFIX.length - 1;

// Letters, digits and underscores only: the name is written into derived index and journal names
// and into migration SQL, where it must mean the same thing on every dialect.
const TABLE_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;

/**
 * Asserts that `name` can name the keys table on every dialect: 1 to 38 ASCII letters, digits or
 * underscores, not starting with a digit.
 *
 * @throws {@link InvalidOptionError} otherwise
 */
export function assertTableName(name: unknown): asserts name is string {
  if (typeof name !== 'string' || !TABLE_NAME.test(name) || name.length > MAX_TABLE_NAME_LENGTH) {
    throw new InvalidOptionError(
      `the table name must be 1 to ${MAX_TABLE_NAME_LENGTH} letters, digits or underscores, not starting with a digit, got ${
        typeof name === 'string' ? JSON.stringify(name.slice(0, 80)) : typeof name
      }`,
    );
  }
}

/**
 * The library's own migrations journal for the keys table `table`: `__idempotency_migrations` for
 * the default `keys`, `__idempotency_migrations_<table>` for any other, so two stores in one
 * database keep separate journals and neither ever touches the application's.
 *
 * @example
 * ```ts
 * migrationsTableName('keys'); // '__idempotency_migrations'
 * migrationsTableName('idem'); // '__idempotency_migrations_idem'
 * ```
 */
export function migrationsTableName(table: string): string {
  return table === DEFAULT_TABLE_NAME ? JOURNAL_PREFIX : `${JOURNAL_PREFIX}_${table}`;
}

/**
 * The name of the retention index of the keys table `table`, derived from it so that two tables
 * never claim the same index name (`keys_status_expires_id_idx` for the default table).
 */
export function retentionIndexName(table: string): string {
  return `${table}${INDEX_SUFFIX}`;
}

/**
 * Rewrites one statement of the committed migrations (written for the table `keys`) for the table
 * `table`: every quoted identifier `keys` becomes `table`, and every `keys_…` (the index names)
 * becomes `table_…`. The identity for the default table.
 *
 * @param statement - one statement of a migration file
 * @param table - the table's name, already checked by {@link assertTableName}
 * @param quote - the dialect's identifier quote: `"` (PostgreSQL) or a backtick (SQLite, MySQL)
 * @example
 * ```ts
 * renameMigrationStatement('CREATE INDEX "keys_status_expires_id_idx" ON "keys" ("id")', 'idem', '"');
 * // 'CREATE INDEX "idem_status_expires_id_idx" ON "idem" ("id")'
 * ```
 */
export function renameMigrationStatement(statement: string, table: string, quote: string): string {
  if (table === DEFAULT_TABLE_NAME) return statement;
  const pattern = new RegExp(`${quote}${DEFAULT_TABLE_NAME}(_[A-Za-z0-9_]*)?${quote}`, 'g');
  return statement.replace(
    pattern,
    (_match, suffix: string | undefined) => `${quote}${table}${suffix ?? ''}${quote}`,
  );
}
