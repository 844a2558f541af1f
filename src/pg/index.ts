export type { BatchSizes } from '../core/statement-batch.js';
export type { PgBatchStats } from './batch.js';
export type { AnyPgDatabase } from './client.js';
export type { PgDeploymentOptions } from './deployment.js';
export { checkPgDeployment } from './deployment.js';
export type { PgMigrationOptions } from './migrate.js';
export { applyPgMigrations, assertAdoptablePgKeysTable, pgMigrationStatus } from './migrate.js';
export type { NeonHttpHandlerBatch } from './neon-http.js';
export { neonHttpTransaction } from './neon-http.js';
export type { AnyNeonHttpDatabase } from './neon-migrate.js';
export { applyNeonHttpMigrations } from './neon-migrate.js';
export type { OpenPgStoreOptions } from './open.js';
export { openPgStore } from './open.js';
export type { PgPushTables } from './push.js';
export { pgPushTables } from './push.js';
export type {
  PgKeysTable,
  PgKeysTableSchemaOptions,
  PgTableOptions,
} from './schema.js';
export { DEFAULT_PG_SCHEMA, keys, pgKeysTable } from './schema.js';
export { pgSteps } from './steps.js';
export type { PgStoreOptions } from './store.js';
export { PgIdempotencyStore } from './store.js';
export type { PgHandlerTransaction, PgTransactionOptions } from './transaction.js';
export { pgTransaction } from './transaction.js';
