import { sql } from 'drizzle-orm';
import {
  customType,
  doublePrecision,
  index,
  type PgTableFn,
  pgSchema,
  pgTable,
  text,
} from 'drizzle-orm/pg-core';
import type { KeyStatus } from '../core/status.js';

/** The schema the store uses when none is given. */
export const DEFAULT_PG_SCHEMA = 'public';

// Keys must sort in byte order (UTF-8 code points), exactly as SQLite's BINARY collation does:
// `expired` and `purge` return ids ascending, and the database's default collation (en_US, …)
// would order them by language rules instead. The "C" collation also makes every comparison in
// the primary key and the retention index a plain memcmp.
const byteOrderText = customType<{ data: string; driverData: string }>({
  dataType: () => 'text COLLATE "C"',
});

function columns() {
  return {
    id: byteOrderText('id').primaryKey(),
    fingerprint: text('fingerprint').notNull(),
    status: text('status').$type<KeyStatus>().notNull(),
    response: text('response'),
    // `real` is float4 in PostgreSQL (16777217 would come back as 16777216).
    expires: doublePrecision('expires').notNull(),
  };
}

/**
 * Builds the `keys` table in `schemaName`: exactly the five columns of the contract, `id` in the
 * byte-order "C" collation, and the retention index on `(status, expires, id)`.
 *
 * @param schemaName - the PostgreSQL schema holding the table; default `public`
 * @example
 * ```ts
 * import { pgKeysTable } from 'drizzle-idempotency/pg';
 * const keys = pgKeysTable('billing');
 * const pending = await db.select().from(keys).where(eq(keys.status, 'pending'));
 * ```
 */
export function pgKeysTable(schemaName: string = DEFAULT_PG_SCHEMA) {
  // drizzle refuses pgSchema('public'): tables of the default schema are built with pgTable.
  // Both builders make the same table; only the type of its `schema` differs.
  const table = (
    schemaName === DEFAULT_PG_SCHEMA ? pgTable : pgSchema(schemaName).table
  ) as PgTableFn<string | undefined>;
  return table('keys', columns(), (t) => [
    index('keys_status_expires_id_idx').on(t.status, t.expires, t.id),
    // Done rows in id order with their deadlines: a purge of a large backlog walks it from the
    // lowest id, checking `expires` in the index, instead of sorting the whole backlog. Partial,
    // so a reserve (a pending row) never writes to it.
    index('keys_done_id_expires_idx').on(t.id, t.expires).where(sql`status = 'done'`),
  ]);
}

/** The type of a `keys` table built by {@link pgKeysTable}, whatever its schema. */
export type PgKeysTable = ReturnType<typeof pgKeysTable>;

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
