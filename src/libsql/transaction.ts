import type { TransactionOf } from '../core/drizzle-types.js';
import { ownerRow } from '../core/key-conditions.js';
import { KeyStatus } from '../core/status.js';
import type { MaybePromise } from '../core/store.js';
import {
  type KeyOwner,
  runFenced,
  type TransactionOutcome,
  type TransactionRunner,
} from '../core/transaction-runner.js';
import type { AnyLibsqlDatabase, LibsqlIdempotencyStore } from './store.js';
import { writeQueue } from './write-queue.js';

/**
 * The drizzle transaction a libSQL handler receives: the one a libSQL database's `transaction`
 * hands its callback, in either major of drizzle-orm.
 */
export type LibsqlHandlerTransaction = TransactionOf<AnyLibsqlDatabase>;

// Thrown out of a transaction SQLite already rolled back, whose handler caught the error that did
// it.
class RolledBackUnderHandler extends Error {}

// Whether libSQL refused a statement because its transaction is over: SQLite rolled it back.
function transactionClosed(error: unknown): boolean {
  for (let current = error; current instanceof Error; current = current.cause) {
    if ((current as { code?: unknown }).code === 'TRANSACTION_CLOSED') return true;
  }
  return false;
}

/**
 * The transactional form on libSQL: the handler's writes and the stored answer commit in one
 * interactive `write` transaction (`BEGIN IMMEDIATE`) on the store's client, so the app's tables
 * must live in the same database as the keys table. Unlike better-sqlite3, the handler may be
 * asynchronous: `async (tx) => result`.
 *
 * The transaction holds the database's write lock from its first statement to its commit. The
 * answer is recorded in the store's own table (`store.table`) by an `UPDATE` of the owner's
 * pending row (and its fencing token) on the transaction itself, as its last statement; if a
 * takeover committed before the transaction began, it matches nothing and everything rolls back.
 *
 * The transactions and the store's writes (claims, releases, lease renewals of other calls) take
 * turns in one queue per client, so overlapping calls never wait on a lock held in this process:
 * each claim or release waits, as a promise, for the transaction before it to commit, and the
 * transactions run one after another, as SQLite runs writers anyway.
 *
 * A failed statement the handler catches undoes only that statement (a unique violation it turns
 * into a 409 commits with its other writes), unless the failure made SQLite roll the whole
 * transaction back (`INSERT OR ROLLBACK`, `RAISE(ROLLBACK)`, a full disk): then nothing of the
 * handler's is left, and its answer is recorded alone, as on PostgreSQL.
 *
 * Use only `tx` in the handler, never the store, the root database, or another idempotent call on
 * the same client: their writes wait for this transaction to end, which waits for the handler.
 *
 * @param store - the store the keys are kept in; the transaction runs on its client and records in
 *   its table
 * @example
 * ```ts
 * import { sql } from 'drizzle-orm';
 * import { makeIdempotent } from 'drizzle-idempotency/function';
 * import { libsqlTransaction, openLibsqlStore } from 'drizzle-idempotency/libsql';
 *
 * const store = await openLibsqlStore('file:./app.db');
 * const credit = makeIdempotent(
 *   async (tx, message: { id: string; amount: number }) => {
 *     await tx.run(sql`UPDATE accounts SET balance = balance + ${message.amount}`);
 *     return { credited: message.amount };
 *   },
 *   { transaction: libsqlTransaction(store), key: (message) => message.id },
 * );
 * ```
 */
export function libsqlTransaction(
  store: LibsqlIdempotencyStore<unknown>,
): TransactionRunner<LibsqlHandlerTransaction> {
  const { table } = store;
  const queued = writeQueue(store.db.$client);
  const recordOn = async (
    db: LibsqlHandlerTransaction | AnyLibsqlDatabase,
    owner: KeyOwner,
    response: string,
  ): Promise<number> => {
    const done = await db
      .update(table)
      .set({ status: KeyStatus.done, response })
      .where(ownerRow(table, owner.key, owner.fingerprint, owner.fencingToken));
    return done.rowsAffected;
  };
  return {
    store,
    synchronous: false,
    async run<R>(
      owner: KeyOwner,
      handler: (tx: LibsqlHandlerTransaction) => R | Promise<R>,
      record: (result: R) => MaybePromise<string>,
    ): Promise<TransactionOutcome<R>> {
      let answered: { readonly result: R; readonly response: string } | undefined;
      try {
        return await runFenced(
          // drizzle opens libSQL's default `write` transaction: BEGIN IMMEDIATE.
          (body) => queued(() => store.db.transaction(body)),
          handler,
          async (tx, result) => {
            const response = await record(result);
            try {
              return await recordOn(tx, owner, response);
            } catch (error) {
              if (!transactionClosed(error)) throw error;
              answered = { result, response };
              throw new RolledBackUnderHandler();
            }
          },
        );
      } catch (error) {
        // Set only when the recording found the transaction over; drizzle's rollback of it then
        // fails too, and its error may stand in for ours.
        const alone = answered;
        if (alone === undefined) throw error;
        // Nothing of the handler's is left to commit with it, as on PostgreSQL after a caught
        // failure: the answer is recorded alone, fenced like any other, in its own turn.
        return (await queued(() => recordOn(store.db, owner, alone.response))) === 1
          ? { committed: true, result: alone.result }
          : { committed: false };
      }
    },
  };
}
