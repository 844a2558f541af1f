import { and, eq, sql } from 'drizzle-orm';
import type { TransactionOf } from '../core/drizzle-types.js';
import { InvalidOptionError } from '../core/errors.js';
import { KeyStatus } from '../core/status.js';
import { isThenable } from '../core/thenable.js';
import type {
  KeyOwner,
  TransactionOutcome,
  TransactionRunner,
} from '../core/transaction-runner.js';
import type { AnyBetterSqliteDatabase, SqliteIdempotencyStore } from './store.js';

/**
 * The drizzle transaction a synchronous SQLite handler receives: the one a better-sqlite3
 * database's `transaction` hands its callback, in either major of drizzle-orm.
 */
export type SqliteHandlerTransaction = TransactionOf<AnyBetterSqliteDatabase>;

const p = sql.placeholder;

// Thrown inside the transaction callback to make better-sqlite3 roll back, then caught outside.
class OwnershipLost extends Error {}

// Thrown out of a transaction SQLite already rolled back, whose handler caught the error that did
// it.
class RolledBackUnderHandler extends Error {}

/**
 * The transactional form on SQLite (better-sqlite3): the handler's writes and the stored answer
 * commit in one `BEGIN IMMEDIATE` transaction on the store's own connection, so the app's tables
 * must live in the same database file as the keys table. The answer is recorded in the store's
 * own table (`store.table`), whatever its name.
 *
 * The handler is **synchronous**, `(tx) => result`: better-sqlite3 runs a transaction in one call,
 * and a write after an `await` would land outside it (committed on its own, not rolled back).
 * Do the asynchronous work (network calls) before or after; use `tx` with `.run()`, `.all()`,
 * `.get()`. A handler that returns a promise is rolled back and refused with
 * {@link InvalidOptionError}. The transaction is immediate so it takes the write lock before its
 * first read, and waits for it (busy timeout) instead of failing with `SQLITE_BUSY`.
 *
 * A failed statement the handler catches undoes only that statement (a unique violation it turns
 * into a 409 commits with its other writes), unless the failure made SQLite roll the whole
 * transaction back (`INSERT OR ROLLBACK`, `RAISE(ROLLBACK)`, a full disk): then nothing of the
 * handler's is left, and its answer is recorded alone, as on PostgreSQL.
 *
 * @param store - the store the keys are kept in; the transaction runs on its database and records
 *   in its table
 * @example
 * ```ts
 * import { makeIdempotent } from 'drizzle-idempotency/function';
 * import { openSqliteStore, sqliteTransaction } from 'drizzle-idempotency/sqlite';
 *
 * const store = openSqliteStore('./app.db');
 * const credit = makeIdempotent(
 *   (tx, message: { id: string; amount: number }) => {
 *     tx.run(sql`UPDATE accounts SET balance = balance + ${message.amount}`);
 *     return { credited: message.amount };
 *   },
 *   { transaction: sqliteTransaction(store), key: (message) => message.id },
 * );
 * ```
 */
export function sqliteTransaction(
  store: SqliteIdempotencyStore<unknown>,
): TransactionRunner<SqliteHandlerTransaction> {
  const { table } = store;
  // Prepared once: building the UPDATE per call would cost more than the whole transaction. It
  // runs on the store's connection, so inside the open transaction.
  const recordAnswer = store.db
    .update(table)
    .set({ status: KeyStatus.done, response: sql<string>`${p('response')}` })
    .where(
      and(
        eq(table.id, p('id')),
        eq(table.fingerprint, p('fingerprint')),
        eq(table.status, KeyStatus.pending),
        // The fencing token: a takeover since the claim bumped it, and this matches nothing.
        eq(table.attempt, p('attempt')),
      ),
    )
    .prepare();
  // Whether the answer landed on the owner's pending row.
  const recorded = (owner: KeyOwner, response: string): boolean => {
    const values = {
      id: owner.key,
      fingerprint: owner.fingerprint,
      response,
      attempt: owner.fencingToken,
    };
    return recordAnswer.run(values).changes === 1;
  };
  return {
    store,
    synchronous: true,
    async run<R>(
      owner: KeyOwner,
      handler: (tx: SqliteHandlerTransaction) => R | Promise<R>,
      record: (result: R) => string,
    ): Promise<TransactionOutcome<R>> {
      let answered: { readonly result: R; readonly response: string } | undefined;
      try {
        const result = store.db.transaction(
          (tx) => {
            const result = handler(tx);
            if (isThenable(result)) {
              // Its outcome no longer matters, and must not surface as an unhandled rejection.
              result.then(undefined, () => undefined);
              throw new InvalidOptionError(
                'a SQLite transactional handler must be synchronous: it returned a promise',
              );
            }
            const response = record(result);
            // Some failures (`INSERT OR ROLLBACK`, `RAISE(ROLLBACK)`, a full disk) make SQLite roll
            // the whole transaction back; a handler that caught one still answers. Recorded here,
            // the answer would commit on its own and the commit after it fail.
            if (!store.db.$client.inTransaction) {
              answered = { result, response };
              throw new RolledBackUnderHandler();
            }
            if (!recorded(owner, response)) throw new OwnershipLost();
            return result;
          },
          { behavior: 'immediate' },
        );
        return { committed: true, result };
      } catch (error) {
        if (error instanceof OwnershipLost) return { committed: false };
        // Nothing of the handler's is left to commit with it, as on PostgreSQL after a caught
        // failure: the answer is recorded alone, fenced like any other.
        if (error instanceof RolledBackUnderHandler && answered !== undefined) {
          return recorded(owner, answered.response)
            ? { committed: true, result: answered.result }
            : { committed: false };
        }
        throw error;
      }
    },
  };
}
