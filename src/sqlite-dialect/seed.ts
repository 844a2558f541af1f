import { getTableConfig, sqliteTable } from 'drizzle-orm/sqlite-core';
import { migrationsWithin } from '../core/journal.js';
import { DEFAULT_TABLE_NAME } from '../core/table-name.js';
import { sqliteMigrations } from '../generated/migrations.js';
import { sqliteKeysColumns } from './schema.js';

const { id, fingerprint, status, response, expires } = sqliteKeysColumns();

/**
 * The keys table as the one-shot file functions (`drizzle-idempotency/sqlite-file`) promise it:
 * `id`, `fingerprint`, `status`, `response` and `expires`, in that order, and nothing else. Its
 * statements name these columns only, so they run alike on a file of exactly this shape and on one
 * the full store has given its lease columns (whose defaults are what the store's own `reserve`
 * writes).
 */
export const fiveColumnKeys = sqliteTable(DEFAULT_TABLE_NAME, {
  id,
  fingerprint,
  status,
  response,
  expires,
});

/**
 * The SQLite migrations that keep that five-column table exactly: every index, none of the lease
 * columns. What it leaves out stays pending in the journal, for the full store to apply.
 */
export const fiveColumnMigrations = migrationsWithin(
  sqliteMigrations,
  getTableConfig(fiveColumnKeys).columns.map((column) => column.name),
  '`',
);
