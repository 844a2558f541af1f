export type { SqliteMigrationOptions } from '../sqlite-dialect/migrate.js';
export type { SqliteJournalTable, SqlitePushTables } from '../sqlite-dialect/push.js';
export { sqlitePushTables } from '../sqlite-dialect/push.js';
export type { SqliteKeysTable } from '../sqlite-dialect/schema.js';
export { keys, sqliteKeysTable } from '../sqlite-dialect/schema.js';
export type { SqlitePragmaSource } from './deployment.js';
export { checkSqliteDeployment } from './deployment.js';
export { SqliteGroupCommitStore } from './group-commit-store.js';
export {
  applySqliteMigrations,
  assertAdoptableSqliteKeysTable,
  sqliteMigrationStatus,
} from './migrate.js';
export type { OpenSqliteStoreOptions, SqliteSynchronous } from './open.js';
export { openSqliteStore } from './open.js';
export { sqliteSteps } from './steps.js';
export type { AnyBetterSqliteDatabase, SqliteStoreOptions } from './store.js';
export { MAX_ANSWER_CACHE_SIZE, SqliteIdempotencyStore } from './store.js';
export type { SqliteHandlerTransaction } from './transaction.js';
export { sqliteTransaction } from './transaction.js';
export { StoreThreadExitedError, TransactionUnsupportedError } from './worker-errors.js';
export { openSqliteWorkerStore, SqliteWorkerStore } from './worker-store.js';
