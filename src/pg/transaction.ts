import type { PgTransactionConfig } from 'drizzle-orm/pg-core';
import type { TransactionOf } from '../core/drizzle-types.js';
import { ownerRow } from '../core/key-conditions.js';
import { runRetryingRollbacks, transactionAttempts } from '../core/rolled-back.js';
import { KeyStatus } from '../core/status.js';
import { runFenced, type TransactionRunner } from '../core/transaction-runner.js';
import type { AnyPgDatabase } from './client.js';
import { pgRollbackRetry } from './rolled-back.js';
import type { PgIdempotencyStore } from './store.js';

/**
 * The drizzle transaction a PostgreSQL handler receives, whatever the driver: the one a database's
 * `transaction` hands its callback, in either major of drizzle-orm.
 */
export type PgHandlerTransaction = TransactionOf<AnyPgDatabase>;

/** Options of {@link pgTransaction}. */
export interface PgTransactionOptions {
  /** The transaction's isolation level. Default: the server's (`read committed` unless configured). */
  readonly isolationLevel?: NonNullable<PgTransactionConfig['isolationLevel']>;
  /**
   * How many times the transaction runs when PostgreSQL rolls it back on its own (serialization
   * failure 40001, deadlock 40P01), the handler included. Default 3; 1 never runs it again.
   */
  readonly attempts?: number;
}

/**
 * Runs `handler` in a savepoint of `tx` (drizzle's nested transaction), so that a statement of
 * its that failed, and that it caught, does not leave `tx` aborted. A handler that throws is
 * rethrown, its savepoint rolled back. A handler that answers after such a failure gets its
 * savepoint rolled back too (PostgreSQL would commit none of its writes) and its answer returned.
 */
async function isolated<R>(
  tx: PgHandlerTransaction,
  handler: (tx: PgHandlerTransaction) => R | Promise<R>,
): Promise<R> {
  let answered: { readonly result: R } | undefined;
  try {
    return await tx.transaction(async (savepoint) => {
      answered = { result: await handler(savepoint) };
      return answered.result;
    });
  } catch (error) {
    // The release of an aborted savepoint fails (node-postgres, PGlite), or the driver throws the
    // statement's error at its end even though the handler caught it (postgres-js): either way
    // drizzle rolled back to the savepoint, and the transaction can go on.
    if (answered === undefined) throw error;
    return answered.result;
  }
}

/**
 * The transactional form on PostgreSQL: the handler's writes and the stored answer commit in one
 * `db.transaction(async (tx) => …)` on the store's database (node-postgres, postgres-js or
 * PGlite), so the app's tables must be reachable from the same database.
 *
 * The answer is recorded in the store's own table (`store.table`: its schema and name) by an
 * `UPDATE` of the owner's pending row (and its fencing token) as the transaction's last
 * statement. A takeover that committed first makes it match nothing, and the whole transaction
 * rolls back; one that comes later waits on the row lock and then finds the row done. Use only
 * `tx` in the handler: on PGlite (one connection) the root database would wait for the
 * transaction to end.
 *
 * **A handler that catches a failed statement** (a unique violation it answers with 409): on
 * PostgreSQL a failed statement aborts the whole transaction, so none of the handler's writes can
 * commit any more. The handler runs in a savepoint (its `tx` is drizzle's nested transaction);
 * when it answers after such a failure, the runner rolls back to that savepoint (undoing every
 * write of the handler) and records its answer, so the 409 is stored and replayed as on SQLite and
 * MySQL. Those undo only the failed statement and commit the handler's other writes: to get that
 * on every dialect, put the statement that may fail in `tx.transaction(async (sp) => …)` (a
 * savepoint of its own) and catch around it.
 *
 * **A transaction PostgreSQL rolls back on its own** (a serialization failure 40001 under
 * `repeatable read` or `serializable`, a deadlock 40P01) committed nothing and the key is still
 * this call's, so it runs again in place, handler included, up to `attempts` times (default 3).
 * When every attempt was rolled back the key is released and the call rejects with
 * `TransactionRolledBackError` (HTTP: 503 `request-rolled-back`), which may be retried. Keep
 * effects outside the database out of the handler, or make them idempotent: it may run more than
 * once, though its database writes commit at most once.
 *
 * @param store - the store the keys are kept in; the transaction runs on its database and records
 *   in its table
 * @param options - the isolation level and the attempts
 * @throws `InvalidOptionError` for `attempts` that is not a whole number of at least 1
 * @example
 * ```ts
 * import { makeIdempotent } from 'drizzle-idempotency/function';
 * import { openPgStore, pgTransaction } from 'drizzle-idempotency/pg';
 *
 * const store = await openPgStore(process.env.DATABASE_URL ?? '');
 * const credit = makeIdempotent(
 *   async (tx, message: { id: string; amount: number }) => {
 *     await tx.execute(sql`UPDATE accounts SET balance = balance + ${message.amount}`);
 *     return { credited: message.amount };
 *   },
 *   { transaction: pgTransaction(store), key: (message) => message.id },
 * );
 * ```
 */
export function pgTransaction(
  store: PgIdempotencyStore<unknown>,
  options: PgTransactionOptions = {},
): TransactionRunner<PgHandlerTransaction> {
  const { table } = store;
  const attempts = transactionAttempts(options.attempts);
  const config: PgTransactionConfig | undefined =
    options.isolationLevel === undefined ? undefined : { isolationLevel: options.isolationLevel };
  return {
    store,
    synchronous: false,
    run: (owner, handler, record) =>
      runRetryingRollbacks(
        () =>
          runFenced(
            (body) => store.db.transaction(body, config),
            (tx: PgHandlerTransaction) => isolated(tx, handler),
            async (tx, result) => {
              const done = await tx
                .update(table)
                .set({ status: KeyStatus.done, response: await record(result) })
                .where(ownerRow(table, owner.key, owner.fingerprint, owner.fencingToken))
                .returning({ id: table.id });
              return done.length;
            },
          ),
        pgRollbackRetry(owner.key, attempts),
      ),
  };
}
