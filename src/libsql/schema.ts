/**
 * The libSQL store keeps the same SQLite table as the better-sqlite3 store: one schema, one set
 * of migrations, so either driver can open a file the other made.
 *
 * @module
 */
export type { SqliteKeysTable } from '../sqlite-dialect/schema.js';
export { keys, sqliteKeysTable } from '../sqlite-dialect/schema.js';
