import { ErrorCode } from '../core/errors.js';
import { type RollbackRetry, TransactionRolledBackError } from '../core/rolled-back.js';

// MySQL server error numbers the store handles by name.
/** A duplicate key on insert: `reserve` lost to an existing row. */
export const ER_DUP_ENTRY = 1062;
/** The transaction was chosen as a deadlock victim and rolled back as a whole. */
export const ER_LOCK_DEADLOCK = 1213;
/**
 * A lock wait ran past `innodb_lock_wait_timeout`. InnoDB undoes the statement; the runner's
 * transaction then rolls back as a whole, as for any error that leaves it.
 */
const ER_LOCK_WAIT_TIMEOUT = 1205;

// PlanetScale's serverless driver has no errno field: Vitess writes the number into the message,
// as in "Duplicate entry 'k' for key 'PRIMARY' (errno 1062) (sqlstate 23000)".
const VITESS_ERRNO = /\(errno (\d+)\)/;

function vitessErrno(error: Error): number | undefined {
  if (error.name !== 'DatabaseError') return undefined;
  const found = VITESS_ERRNO.exec(error.message);
  return found?.[1] === undefined ? undefined : Number(found[1]);
}

/**
 * The MySQL error number behind `error`, looking through drizzle's `DrizzleQueryError` (which
 * keeps the driver's error in `cause`), or `undefined` when there is none: mysql2's `errno`, or
 * the `(errno N)` of a PlanetScale serverless driver's `DatabaseError`.
 */
export function mysqlErrno(error: unknown): number | undefined {
  for (let current = error; current instanceof Error; current = current.cause) {
    const errno = (current as { errno?: unknown }).errno;
    if (typeof errno === 'number') return errno;
    const written = vitessErrno(current);
    if (written !== undefined) return written;
  }
  return undefined;
}

/**
 * Whether `error` is the server's refusal of a statement (or of a transaction, rolled back whole):
 * an error response carrying a server error number (1000 and up), on a connection that is still
 * usable. Nothing of the statement was written then. A connection lost while a statement or a
 * COMMIT was on the way (mysql2 marks those `fatal`; a socket error carries a negative errno)
 * leaves the outcome unknown, and is no refusal.
 *
 * @param error - what a statement or a transaction threw
 */
export function mysqlRefused(error: unknown): boolean {
  for (let current = error; current instanceof Error; current = current.cause) {
    if ((current as { fatal?: unknown }).fatal === true) return false;
  }
  return (mysqlErrno(error) ?? 0) >= 1000;
}

// A victim's whole transaction was undone, so running it again is safe; a few attempts are enough
// for the short transactions of the store, and a persistent deadlock is surfaced rather than
// hidden.
const DEADLOCK_ATTEMPTS = 5;

/** How {@link retryDeadlocks} tries again. */
export interface DeadlockRetry {
  /** How many times `work` runs at most. Default 5. */
  readonly attempts?: number;
  /**
   * The ceiling of the first pause before trying again, in milliseconds; each pause is drawn at
   * random below a ceiling that doubles per attempt (up to 250 ms). Default 0: no pause.
   */
  readonly backoffMs?: number;
}

const MAX_BACKOFF_MS = 250;

/**
 * Runs `work` again when MySQL chose it as a deadlock victim. InnoDB resolves a lock cycle by
 * rolling back one of the transactions in it, which is normal under concurrency and leaves no
 * trace of the victim's writes, so the operation is retried from the start. On Galera a
 * certification conflict (another node committed a write to the same rows first) arrives as the
 * same error: a lost race, not a failure.
 *
 * @param work - one statement or one transaction, safe to run again from scratch
 * @param retry - see {@link DeadlockRetry}
 */
export async function retryDeadlocks<R>(
  work: () => Promise<R>,
  { attempts = DEADLOCK_ATTEMPTS, backoffMs = 0 }: DeadlockRetry = {},
): Promise<R> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await work();
    } catch (error) {
      if (attempt >= attempts || mysqlErrno(error) !== ER_LOCK_DEADLOCK) throw error;
      if (backoffMs > 0) {
        // Random below a doubling ceiling, so contenders that collided once do not again in step.
        const ceiling = Math.min(MAX_BACKOFF_MS, backoffMs * 2 ** (attempt - 1));
        await new Promise((resolve) => setTimeout(resolve, Math.random() * ceiling));
      }
    }
  }
}

/**
 * MySQL chose the transaction of a transactional call as a deadlock victim (error 1213) and
 * rolled it back whole on every attempt the runner made (it runs again in place, up to its
 * `attempts`): none of the handler's writes and no result were committed, and the key was
 * released. Call again (`retryDeadlocks(() => call(...))` does) to run it anew. It is a
 * {@link TransactionRolledBackError} with its own code.
 */
export class TransactionDeadlockError extends TransactionRolledBackError {
  /**
   * @param key - the idempotency key
   * @param cause - the driver's deadlock error
   * @param attempts - how many times the transaction ran
   */
  constructor(key: string, cause: unknown, attempts = 1) {
    super(key, attempts, cause, ErrorCode.transactionDeadlock);
  }
}

/**
 * The {@link RollbackRetry} of a MySQL runner for `key`: a deadlock (1213) or a lock wait timeout
 * (1205) runs the transaction again, up to `attempts` times; a deadlock on the last one surfaces
 * as {@link TransactionDeadlockError}, a timeout as {@link TransactionRolledBackError}.
 */
export function mysqlRollbackRetry(key: string, attempts: number): RollbackRetry {
  return {
    attempts,
    rolledBack: (error) => {
      const errno = mysqlErrno(error);
      return errno === ER_LOCK_DEADLOCK || errno === ER_LOCK_WAIT_TIMEOUT;
    },
    surface: (error, ran) =>
      mysqlErrno(error) === ER_LOCK_DEADLOCK
        ? new TransactionDeadlockError(key, error, ran)
        : new TransactionRolledBackError(key, ran, error),
  };
}
