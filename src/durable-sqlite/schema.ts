/**
 * The Durable Object store keeps the same SQLite table as the other SQLite stores: one schema, one
 * set of migrations.
 *
 * @module
 */
export type { SqliteKeysTable } from '../sqlite/schema.js';
export { keys, sqliteKeysTable } from '../sqlite/schema.js';
