import { type RollbackRetry, TransactionRolledBackError } from '../core/rolled-back.js';

// SQLSTATEs of a transaction PostgreSQL rolled back on its own: a serialization failure (a
// concurrent update under REPEATABLE READ or SERIALIZABLE) and a detected deadlock.
const ROLLED_BACK = new Set(['40001', '40P01']);

/**
 * Whether `error` (or a `cause` under it: drizzle wraps the driver's error) carries the SQLSTATE of
 * a transaction PostgreSQL rolled back whole, 40001 or 40P01. node-postgres, postgres-js, PGlite
 * and the Neon driver all put it in `code`.
 */
function pgRolledBack(error: unknown): boolean {
  for (let current = error; current instanceof Error; current = current.cause) {
    const { code } = current as { code?: unknown };
    if (typeof code === 'string' && ROLLED_BACK.has(code)) return true;
  }
  return false;
}

/**
 * The {@link RollbackRetry} of a PostgreSQL runner for `key`: 40001 and 40P01 run again, up to
 * `attempts` times.
 */
export function pgRollbackRetry(key: string, attempts: number): RollbackRetry {
  return {
    attempts,
    rolledBack: pgRolledBack,
    surface: (error, ran) => new TransactionRolledBackError(key, ran, error),
  };
}
