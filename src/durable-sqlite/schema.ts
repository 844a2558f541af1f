/**
 * The Durable Object store keeps the same SQLite table as the other SQLite stores: one schema, one
 * set of migrations.
 *
 * @module
 */
export type { SqliteKeysTable } from '../sqlite-dialect/schema.js';
export { keys, sqliteKeysTable } from '../sqlite-dialect/schema.js';
