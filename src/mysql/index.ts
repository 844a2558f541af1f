export { ER_DUP_ENTRY, ER_LOCK_DEADLOCK, mysqlErrno, retryDeadlocks } from './errors.js';
export type { MysqlMigrationOptions } from './migrate.js';
export {
  applyMysqlMigrations,
  assertAdoptableMysqlKeysTable,
  mysqlMigrationsFolder,
  mysqlMigrationsJournal,
} from './migrate.js';
export type { OpenMysqlStoreOptions } from './open.js';
export { openMysqlStore } from './open.js';
export type { MysqlKeysTable } from './schema.js';
export {
  assertMysqlTableName,
  DEFAULT_MYSQL_TABLE,
  keys,
  MYSQL_MAX_TEXT_BYTES,
  mysqlKeysTable,
  mysqlRetentionIndexName,
} from './schema.js';
export type { AnyMysqlDatabase, MysqlStoreOptions } from './store.js';
export { MysqlIdempotencyStore } from './store.js';
