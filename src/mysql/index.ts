export type { BatchSizes } from '../core/statement-batch.js';
export type { MysqlBatchStats } from './batch.js';
export type { AnyMysqlDatabase } from './client.js';
export { checkMysqlDeployment } from './deployment.js';
export { retryDeadlocks, TransactionDeadlockError } from './errors.js';
export type { MysqlMigrationOptions } from './migrate.js';
export {
  applyMysqlMigrations,
  assertAdoptableMysqlKeysTable,
  mysqlMigrationStatus,
} from './migrate.js';
export type { OpenMysqlStoreOptions } from './open.js';
export { openMysqlStore } from './open.js';
export type { AnyPlanetscaleDatabase, PlanetscaleHandlerTransaction } from './planetscale.js';
export { PlanetscaleIdempotencyStore, planetscaleTransaction } from './planetscale.js';
export { applyPlanetscaleMigrations } from './planetscale-migrate.js';
export type { MysqlKeysTable, MysqlTableOptions } from './schema.js';
export { keys, MYSQL_MAX_TEXT_BYTES, mysqlKeysTable } from './schema.js';
export { mysqlSteps } from './steps.js';
export type { MysqlStoreOptions } from './store.js';
export { MysqlIdempotencyStore } from './store.js';
export type { MysqlHandlerTransaction, MysqlTransactionOptions } from './transaction.js';
export { mysqlTransaction } from './transaction.js';
