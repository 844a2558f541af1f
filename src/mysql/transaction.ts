import type { MySqlTransactionConfig } from 'drizzle-orm/mysql-core';
import type { TransactionOf } from '../core/drizzle-types.js';
import { ownerRow } from '../core/key-conditions.js';
import { runRetryingRollbacks, transactionAttempts } from '../core/rolled-back.js';
import { KeyStatus } from '../core/status.js';
import { runFenced, type TransactionRunner } from '../core/transaction-runner.js';
import type { AnyMysqlDatabase } from './client.js';
import { mysqlRollbackRetry } from './errors.js';
import type { MysqlIdempotencyStore } from './store.js';

/**
 * The drizzle transaction a MySQL handler receives: the one a mysql2 database's `transaction` hands
 * its callback, in either major of drizzle-orm.
 */
export type MysqlHandlerTransaction = TransactionOf<AnyMysqlDatabase>;

/** Options of {@link mysqlTransaction}. */
export interface MysqlTransactionOptions {
  /** The transaction's isolation level. Default `'read committed'`, as the store's own transactions. */
  readonly isolationLevel?: NonNullable<MySqlTransactionConfig['isolationLevel']>;
  /**
   * How many times the transaction runs when InnoDB rolls it back (deadlock 1213, lock wait
   * timeout 1205), the handler included. Default 3; 1 never runs it again.
   */
  readonly attempts?: number;
}

/**
 * The transactional form on MySQL and MariaDB (mysql2): the handler's writes and the stored
 * answer commit in one `db.transaction(async (tx) => …)` on a connection of the store's pool, in
 * READ COMMITTED unless `isolationLevel` says otherwise, so the app's tables must be reachable
 * from the same database. The answer is recorded in the store's own table (`store.table`).
 *
 * The answer is recorded by an `UPDATE` of the owner's pending row (and its fencing token) as
 * the transaction's last statement, judged by the number of rows it changed. A takeover that
 * committed first makes it match nothing, and the whole transaction rolls back; one that comes
 * later waits on the row lock and then finds the row done.
 *
 * A failed statement the handler catches undoes only that statement (a unique violation it turns
 * into a 409 commits with its other writes). A deadlock must not be caught in the handler: InnoDB
 * has then rolled the whole transaction back and the connection runs in autocommit.
 *
 * A transaction MySQL picks as a deadlock victim (1213), or one whose lock wait timed out (1205),
 * is rolled back whole while the key stays this call's, so it runs again in place, handler
 * included, up to `attempts` times (default 3). When every attempt was rolled back the key is
 * released and the call rejects with `TransactionDeadlockError` (a deadlock) or
 * `TransactionRolledBackError` (HTTP: 503 `request-rolled-back`), which may be retried:
 * `retryDeadlocks` runs it again from the start. Keep effects outside the database out of the
 * handler, or make them idempotent: it may run more than once, though its database writes commit
 * at most once.
 *
 * @param store - the store the keys are kept in; the transaction runs on its database
 * @param options - the isolation level and the attempts
 * @throws `InvalidOptionError` for `attempts` that is not a whole number of at least 1
 * @example
 * ```ts
 * import { sql } from 'drizzle-orm';
 * import { makeIdempotent } from 'drizzle-idempotency/function';
 * import { mysqlTransaction, openMysqlStore, retryDeadlocks } from 'drizzle-idempotency/mysql';
 *
 * const store = await openMysqlStore(process.env.MYSQL_URL ?? '');
 * const credit = makeIdempotent(
 *   async (tx, message: { id: string; amount: number }) => {
 *     await tx.execute(sql`UPDATE accounts SET balance = balance + ${message.amount}`);
 *     return { credited: message.amount };
 *   },
 *   { transaction: mysqlTransaction(store), key: (message) => message.id },
 * );
 * await retryDeadlocks(() => credit({ id: 'm-1', amount: 5 }));
 * ```
 */
export function mysqlTransaction(
  store: MysqlIdempotencyStore<unknown>,
  options: MysqlTransactionOptions = {},
): TransactionRunner<MysqlHandlerTransaction> {
  const { table } = store;
  const config: MySqlTransactionConfig = {
    isolationLevel: options.isolationLevel ?? 'read committed',
  };
  const attempts = transactionAttempts(options.attempts);
  return {
    store,
    synchronous: false,
    run: (owner, handler, record) =>
      runRetryingRollbacks(
        () =>
          runFenced(
            (body) => store.db.transaction(body, config),
            handler,
            async (tx, result) => {
              const [done] = await tx
                .update(table)
                .set({ status: KeyStatus.done, response: await record(result) })
                .where(ownerRow(table, owner.key, owner.fingerprint, owner.fencingToken));
              return done.affectedRows;
            },
          ),
        mysqlRollbackRetry(owner.key, attempts),
      ),
  };
}
