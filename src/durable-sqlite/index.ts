export type {
  AnyDurableSqliteDatabase,
  DurableSqliteCursorLike,
  DurableSqliteStorageLike,
} from './client.js';
export type { DurableSqliteMigrationOptions } from './migrate.js';
export { applyDurableSqliteMigrations } from './migrate.js';
export type { SqliteKeysTable } from './schema.js';
export { keys, sqliteKeysTable } from './schema.js';
export { durableSqliteSteps } from './steps.js';
export type { DurableSqliteStoreOptions } from './store.js';
export { DurableSqliteIdempotencyStore } from './store.js';
export type { DurableSqliteHandlerTransaction } from './transaction.js';
export { durableSqliteTransaction } from './transaction.js';
