export type {
  AnyD1Database,
  D1DatabaseLike,
  D1PreparedStatementLike,
  D1ResultLike,
} from './client.js';
export type { D1MigrationOptions } from './migrate.js';
export { applyD1Migrations } from './migrate.js';
export type { SqliteKeysTable } from './schema.js';
export { keys, sqliteKeysTable } from './schema.js';
export { d1Steps } from './steps.js';
export type { D1StoreOptions } from './store.js';
export { D1IdempotencyStore } from './store.js';
export type { D1HandlerBatch, D1Query, D1TransactionOptions } from './transaction.js';
export { d1Transaction } from './transaction.js';
