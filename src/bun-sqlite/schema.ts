/**
 * The bun:sqlite store keeps the same SQLite table as the better-sqlite3 and libSQL stores: one
 * schema, one set of migrations.
 *
 * @module
 */
export type { SqliteKeysTable } from '../sqlite-dialect/schema.js';
export { keys, sqliteKeysTable } from '../sqlite-dialect/schema.js';
