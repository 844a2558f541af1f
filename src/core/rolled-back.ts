import { ErrorCode, IdempotencyError, InvalidOptionError } from './errors.js';

/**
 * How many times a transactional runner runs a transaction the database rolled back on its own (a
 * serialization failure, a deadlock, a lock wait timeout) before it gives up: such a rollback
 * undoes every write of the attempt and leaves the key claimed, so the next attempt starts clean.
 */
export const DEFAULT_TRANSACTION_ATTEMPTS = 3;

/**
 * The database rolled back the transaction of a transactional call or request on its own (a
 * PostgreSQL serialization failure 40001 or deadlock 40P01, a MySQL deadlock 1213 or lock wait
 * timeout 1205) on every one of its attempts: none of its writes and no result were committed, and
 * its key was released. Unlike `ResultNotRecordedError`, it is safe to call again: a retry runs
 * the work anew. The HTTP layer answers it with 503 `request-rolled-back` and `Retry-After`.
 */
export class TransactionRolledBackError extends IdempotencyError {
  /** The idempotency key of the call that was rolled back. */
  readonly key: string;
  /** How many times the transaction ran before giving up. */
  readonly attempts: number;

  /**
   * @param key - the idempotency key
   * @param attempts - how many times the transaction ran
   * @param cause - the driver's error of the last attempt
   * @param code - the stable code, when a subclass has its own
   */
  constructor(
    key: string,
    attempts: number,
    cause: unknown,
    code: ErrorCode = ErrorCode.requestRolledBack,
  ) {
    super(
      code,
      `the transaction of idempotency key ${JSON.stringify(key)} was rolled back by the database ${attempts === 1 ? 'once' : `${attempts} times`}; nothing of it was committed and the key is free, so it may be retried`,
      { cause },
    );
    this.key = key;
    this.attempts = attempts;
  }
}

/** How {@link runRetryingRollbacks} tells a rollback by the database and reports the last one. */
export interface RollbackRetry {
  /** How many times the transaction runs at most (at least 1). */
  readonly attempts: number;
  /** Whether `error` means the database rolled the whole transaction back on its own. */
  rolledBack(error: unknown): boolean;
  /** The error the caller gets once every attempt was rolled back. */
  surface(error: unknown, attempts: number): TransactionRolledBackError;
}

/**
 * Runs `transaction` again, in place, while the database rolls it back on its own, up to
 * `retry.attempts` times; then rejects with `retry.surface(…)`. Any other error is rethrown at
 * once. The caller's key stays claimed across the attempts (its claim is its own earlier commit),
 * so no duplicate runs in between; the handler does run once per attempt, which is why only a
 * rollback that undid every write of the attempt is retried.
 *
 * @param transaction - one attempt of the whole transaction, handler included
 * @param retry - see {@link RollbackRetry}
 */
export async function runRetryingRollbacks<T>(
  transaction: () => Promise<T>,
  retry: RollbackRetry,
): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await transaction();
    } catch (error) {
      if (!retry.rolledBack(error)) throw error;
      if (attempt >= retry.attempts) throw retry.surface(error, attempt);
    }
  }
}

/**
 * The `attempts` option of a transactional runner, checked: a whole number of at least 1.
 *
 * @param attempts - the option as given
 * @throws {@link InvalidOptionError} for anything else
 */
export function transactionAttempts(attempts: number | undefined): number {
  if (attempts === undefined) return DEFAULT_TRANSACTION_ATTEMPTS;
  if (!Number.isSafeInteger(attempts) || attempts < 1) {
    throw new InvalidOptionError(
      `attempts must be a whole number of at least 1, got ${String(attempts)}`,
    );
  }
  return attempts;
}
