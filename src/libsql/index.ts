export { applyLibsqlMigrations } from './migrate.js';
export type { OpenLibsqlStoreOptions } from './open.js';
export { openLibsqlStore } from './open.js';
export { keys } from './schema.js';
export type { AnyLibsqlDatabase, LibsqlStoreOptions } from './store.js';
export { LibsqlIdempotencyStore } from './store.js';
