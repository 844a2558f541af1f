import { InvalidOptionError } from './errors.js';
import { type RollbackRetry, runRetryingRollbacks } from './rolled-back.js';
import type { StepRecorder } from './steps.js';
import type { LeasedIdempotencyStore } from './store.js';
import { isThenable } from './thenable.js';
import { type KeyOwner, runFenced, type TransactionOutcome } from './transaction-runner.js';

/**
 * What a dialect with interactive asynchronous transactions (PostgreSQL, MySQL, libSQL) supplies
 * for its step log: its statements and its transaction's quirks. The recording protocol (a fenced
 * `UPDATE` of the key's `steps` column, alone or as the last statement of the step's transaction,
 * rolled back when it changed no row) is written once, in {@link interactiveStepRecorder}.
 *
 * @typeParam TX - the drizzle transaction a transactional step receives
 * @typeParam DB - the store's drizzle database
 */
export interface InteractiveStepStatements<TX, DB> {
  /** The store of the keys. */
  readonly store: LeasedIdempotencyStore<unknown> & { readonly db: DB };
  /** The stored `steps` column of the pending row of `key` claimed with `digest`, or `null`. */
  read(key: string, digest: string): Promise<string | null>;
  /**
   * Writes `stored` in the `steps` column of the owner's row, fenced by its token, on `on` (the
   * store's database or a transaction); answers how many rows changed (the driver's own count).
   */
  record(on: DB | TX, owner: KeyOwner, stored: string): Promise<number>;
  /** Runs `body` in one transaction of the dialect (its isolation level, its write queue). */
  transaction<T>(body: (tx: TX) => Promise<T>): Promise<T>;
  /**
   * How a transaction the database rolled back on its own (a deadlock, a serialization failure)
   * runs again for `key`; absent where the database never does that (SQLite's `BEGIN IMMEDIATE`).
   */
  readonly rollbackRetry?: (key: string) => RollbackRetry;
}

/**
 * The step recorder of a dialect with interactive asynchronous transactions.
 *
 * @param statements - the dialect's statements and quirks
 */
export function interactiveStepRecorder<TX, DB>(
  statements: InteractiveStepStatements<TX, DB>,
): StepRecorder<TX> {
  const { store } = statements;
  return {
    store,
    synchronous: false,
    read: (key, digest) => statements.read(key, digest),
    write: async (owner, stored) => (await statements.record(store.db, owner, stored)) === 1,
    transact: <R>(
      owner: KeyOwner,
      body: (tx: TX) => R | Promise<R>,
      stored: (result: R) => string | Promise<string>,
    ): Promise<TransactionOutcome<R>> => {
      const once = () =>
        runFenced(
          (inner) => statements.transaction(inner),
          body,
          async (tx, result) => statements.record(tx, owner, await stored(result)),
        );
      const retry = statements.rollbackRetry?.(owner.key);
      return retry === undefined ? once() : runRetryingRollbacks(once, retry);
    },
  };
}

/**
 * What a synchronous SQLite runtime (better-sqlite3, bun:sqlite, a Durable Object's SQLite)
 * supplies for its step log: a transaction whose body cannot span an `await`, and the fenced
 * `UPDATE` of the `steps` column.
 *
 * @typeParam TX - the drizzle transaction a transactional step receives
 */
export interface SynchronousStepStatements<TX> {
  /** The store of the keys. */
  readonly store: LeasedIdempotencyStore<unknown>;
  /** The runtime's name in the error that refuses an asynchronous transactional step. */
  readonly runtime: string;
  /** The stored `steps` column of the pending row of `key` claimed with `digest`, or `null`. */
  read(key: string, digest: string): string | null;
  /**
   * Writes `stored` in the `steps` column of the owner's row, fenced by its token, on the store's
   * connection (so inside an open transaction too); answers whether it changed the row.
   */
  record(owner: KeyOwner, stored: string, tx?: TX): boolean;
  /** Runs `body` in one write transaction (`BEGIN IMMEDIATE`, `transactionSync`). */
  transaction<T>(body: (tx: TX) => T): T;
}

// Thrown inside the transaction callback to make the driver roll back, then caught outside.
class OwnershipLost extends Error {}

/**
 * The step recorder of a synchronous SQLite runtime: a transactional step's function must answer
 * at once (a promise is refused with `InvalidOptionError` and rolled back).
 *
 * @param statements - the runtime's statements
 */
export function synchronousStepRecorder<TX>(
  statements: SynchronousStepStatements<TX>,
): StepRecorder<TX> {
  return {
    store: statements.store,
    synchronous: true,
    read: async (key, digest) => statements.read(key, digest),
    write: async (owner, stored) => statements.record(owner, stored),
    transact: async <R>(
      owner: KeyOwner,
      body: (tx: TX) => R | Promise<R>,
      stored: (result: R) => string,
    ): Promise<TransactionOutcome<R>> => {
      try {
        const result = statements.transaction((tx) => {
          const result = body(tx);
          if (isThenable(result)) {
            // Its outcome no longer matters, and must not surface as an unhandled rejection.
            result.then(undefined, () => undefined);
            throw new InvalidOptionError(
              `a ${statements.runtime} transactional step must be synchronous: it returned a promise`,
            );
          }
          if (!statements.record(owner, stored(result), tx)) throw new OwnershipLost();
          return result;
        });
        return { committed: true, result };
      } catch (error) {
        if (error instanceof OwnershipLost) return { committed: false };
        throw error;
      }
    },
  };
}
