/**
 * The former subpath of the one-shot SQLite file functions, kept for 0.x imports.
 *
 * @deprecated Import from `drizzle-idempotency/sqlite-file`: the same functions. Removed in 1.0.
 * @module
 */
export {
  counts,
  expired,
  fetch,
  finish,
  initDb,
  purge,
  reserve,
  retentionCycle,
} from './sqlite-file.js';
