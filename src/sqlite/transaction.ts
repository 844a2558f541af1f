import type { RunResult } from 'better-sqlite3';
import { and, eq, sql } from 'drizzle-orm';
import type { SQLiteTransaction } from 'drizzle-orm/sqlite-core';
import { InvalidOptionError } from '../core/errors.js';
import { KeyStatus } from '../core/status.js';
import { isThenable } from '../core/thenable.js';
import type { TransactionRunner } from '../function/transaction.js';
import type { SqliteIdempotencyStore } from './store.js';

/** The drizzle transaction a synchronous SQLite handler receives. */
// biome-ignore lint/suspicious/noExplicitAny: the handler may use any schema of the app's
export type SqliteHandlerTransaction = SQLiteTransaction<'sync', RunResult, any, any>;

const p = sql.placeholder;

// Thrown inside the transaction callback to make better-sqlite3 roll back, then caught outside.
class OwnershipLost extends Error {}

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
  const recordAnswer = (fenced: boolean) =>
    store.db
      .update(table)
      .set({ status: KeyStatus.done, response: sql<string>`${p('response')}` })
      .where(
        and(
          eq(table.id, p('id')),
          eq(table.fingerprint, p('fingerprint')),
          eq(table.status, KeyStatus.pending),
          // The fencing token: a takeover since the claim bumped it, and this matches nothing.
          fenced ? eq(table.attempt, p('attempt')) : undefined,
        ),
      )
      .prepare();
  const recordUnfenced = recordAnswer(false);
  const recordFenced = recordAnswer(true);
  return {
    store,
    synchronous: true,
    async run(owner, handler, record) {
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
            const values = { id: owner.key, fingerprint: owner.digest, response: record(result) };
            const done =
              owner.attempt === undefined
                ? recordUnfenced.run(values)
                : recordFenced.run({ ...values, attempt: owner.attempt });
            if (done.changes !== 1) throw new OwnershipLost();
            return result;
          },
          { behavior: 'immediate' },
        );
        return { committed: true, result };
      } catch (error) {
        if (error instanceof OwnershipLost) return { committed: false };
        throw error;
      }
    },
  };
}
