export type { SqliteJournalTable, SqlitePushTables } from '../sqlite-dialect/push.js';
export { sqlitePushTables } from '../sqlite-dialect/push.js';
export type { LibsqlMigrationOptions } from './migrate.js';
export {
  applyLibsqlMigrations,
  assertAdoptableLibsqlKeysTable,
  libsqlMigrationStatus,
} from './migrate.js';
export type { OpenLibsqlStoreOptions } from './open.js';
export { openLibsqlStore } from './open.js';
export type { SqliteKeysTable } from './schema.js';
export { keys, sqliteKeysTable } from './schema.js';
export { libsqlSteps } from './steps.js';
export type { AnyLibsqlDatabase, LibsqlStoreOptions } from './store.js';
export { LibsqlIdempotencyStore } from './store.js';
export type { LibsqlHandlerTransaction } from './transaction.js';
export { libsqlTransaction } from './transaction.js';
