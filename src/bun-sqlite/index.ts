export type {
  AnyBunSqliteDatabase,
  BunSqliteDatabaseLike,
  BunSqliteStatementLike,
} from './client.js';
export type { BunSqliteMigrationOptions } from './migrate.js';
export { applyBunSqliteMigrations } from './migrate.js';
export type { OpenBunSqliteStoreOptions } from './open.js';
export { openBunSqliteStore } from './open.js';
export type { SqliteKeysTable } from './schema.js';
export { keys, sqliteKeysTable } from './schema.js';
export type { BunSqliteHandlerTransaction } from './steps.js';
export { bunSqliteSteps } from './steps.js';
export type { BunSqliteStoreOptions } from './store.js';
export { BunSqliteIdempotencyStore } from './store.js';
