import type { TransactionOf } from '../core/drizzle-types.js';
import { InvalidOptionError } from '../core/errors.js';
import { ownerRow } from '../core/key-conditions.js';
import { KeyStatus } from '../core/status.js';
import { isThenable } from '../core/thenable.js';
import type {
  KeyOwner,
  TransactionOutcome,
  TransactionRunner,
} from '../core/transaction-runner.js';
import type { AnyDurableSqliteDatabase } from './client.js';
import type { DurableSqliteIdempotencyStore } from './store.js';

/** The drizzle transaction a Durable Object handler receives. */
export type DurableSqliteHandlerTransaction = TransactionOf<AnyDurableSqliteDatabase>;

// Thrown inside the transaction callback to make transactionSync roll back, then caught outside.
class OwnershipLost extends Error {}

/**
 * The transactional form in a Durable Object: the handler's writes and the stored answer commit in
 * one `transactionSync` of the object's storage, so the app's tables must live in the same object
 * as the keys table. The answer is recorded in the store's own table (`store.table`) by an UPDATE
 * of the owner's pending row (and its fencing token) as the transaction's last statement; when
 * it changes no row (a takeover or a release happened since the claim), everything rolls back and
 * the outcome is `{ committed: false }`.
 *
 * The handler is **synchronous**, `(tx) => result`: `transactionSync` runs in one call, and a write
 * after an `await` would land outside it. Do the asynchronous work (reading the body, calls to
 * other services) before, in the HTTP layer's `prepare`; use `tx` with `.run()`, `.all()`,
 * `.get()`. A handler that returns a promise is rolled back and refused with
 * {@link InvalidOptionError}. A handler that throws rolls back everything and the error is
 * rethrown; the key stays pending.
 *
 * @param store - the store the keys are kept in; the transaction runs on its storage and records
 *   in its table
 * @example
 * ```ts
 * import { sql } from 'drizzle-orm';
 * import { durableSqliteTransaction } from 'drizzle-idempotency/durable-sqlite';
 * import { makeIdempotent } from 'drizzle-idempotency/function';
 *
 * const credit = makeIdempotent(
 *   (tx, message: { id: string; amount: number }) => {
 *     tx.run(sql`UPDATE accounts SET balance = balance + ${message.amount}`);
 *     return { credited: message.amount };
 *   },
 *   { transaction: durableSqliteTransaction(store), key: (message) => message.id },
 * );
 * ```
 */
export function durableSqliteTransaction(
  store: DurableSqliteIdempotencyStore<unknown>,
): TransactionRunner<DurableSqliteHandlerTransaction> {
  const { db, table } = store;
  // Whether the answer landed on the owner's pending row: RETURNING says, as run() answers nothing.
  const recorded = (tx: DurableSqliteHandlerTransaction, owner: KeyOwner, response: string) =>
    tx
      .update(table)
      .set({ status: KeyStatus.done, response })
      .where(ownerRow(table, owner.key, owner.fingerprint, owner.fencingToken))
      .returning({ id: table.id })
      .all().length === 1;
  return {
    store,
    synchronous: true,
    async run<R>(
      owner: KeyOwner,
      handler: (tx: DurableSqliteHandlerTransaction) => R | Promise<R>,
      record: (result: R) => string,
    ): Promise<TransactionOutcome<R>> {
      try {
        const result = db.transaction((tx) => {
          const result = handler(tx);
          if (isThenable(result)) {
            // Its outcome no longer matters, and must not surface as an unhandled rejection.
            result.then(undefined, () => undefined);
            throw new InvalidOptionError(
              'a Durable Object transactional handler must be synchronous: it returned a promise',
            );
          }
          if (!recorded(tx, owner, record(result))) throw new OwnershipLost();
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
