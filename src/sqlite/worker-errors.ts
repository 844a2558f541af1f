import { ErrorCode, IdempotencyError } from '../core/errors.js';

/**
 * The worker thread of a `SqliteWorkerStore` ended without `close()` (it was terminated, ran out
 * of memory, or crashed). Every operation that was waiting for it rejects with this error, and so
 * does every later call: the store is closed. A write whose promise rejected this way may or may
 * not have committed, exactly as when a process dies mid-request: the key is then pending, or done,
 * and a retry finds out which. Open a new store to go on.
 */
export class StoreThreadExitedError extends IdempotencyError {
  /** The worker's exit code, or `undefined` when it ended with an uncaught error. */
  readonly exitCode: number | undefined;

  /**
   * @param exitCode - the worker's exit code, when it exited
   * @param cause - the uncaught error that ended it, when there is one
   */
  constructor(exitCode: number | undefined, cause?: unknown) {
    super(
      ErrorCode.storeThreadExited,
      exitCode === undefined
        ? `the idempotency store's worker thread crashed: ${(cause as Error | undefined)?.message ?? 'unknown error'}`
        : `the idempotency store's worker thread exited with code ${exitCode}`,
      { cause },
    );
    this.exitCode = exitCode;
  }
}

/**
 * The transactional form (the handler's writes and the stored answer in one transaction of the
 * store's connection) asked of a `SqliteWorkerStore`. Its connection lives on its worker thread,
 * and a synchronous driver cannot run a transaction whose body is on another thread. Use
 * `sqliteTransaction(openSqliteStore(path))` on the same file for the transactional handlers: the
 * two stores share the file and its rows.
 */
export class TransactionUnsupportedError extends IdempotencyError {
  constructor() {
    super(
      ErrorCode.transactionUnsupported,
      'SqliteWorkerStore runs its connection on a worker thread and has no transactional form: use sqliteTransaction(openSqliteStore(path)) on the same file for transactional handlers',
    );
  }
}
