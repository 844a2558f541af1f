export { assertSchemaName, quoteIdentifier } from './identifier.js';
export type { PgMigrationOptions } from './migrate.js';
export { applyPgMigrations, assertAdoptablePgKeysTable, pgMigrationsFolder } from './migrate.js';
export type { OpenPgStoreOptions } from './open.js';
export { openPgStore } from './open.js';
export type { PgKeysTable, PgKeysTableOptions, PgTableOptions } from './schema.js';
export { DEFAULT_PG_SCHEMA, keys, pgKeysTable } from './schema.js';
export type { AnyPgDatabase, PgStoreOptions } from './store.js';
export { PgIdempotencyStore } from './store.js';
