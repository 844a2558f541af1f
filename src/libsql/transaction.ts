import type { ResultSet } from '@libsql/client';
import type { SQLiteTransaction } from 'drizzle-orm/sqlite-core';
import { ownerRow } from '../core/key-conditions.js';
import { KeyStatus } from '../core/status.js';
import { runFenced, type TransactionRunner } from '../function/transaction.js';
import type { LibsqlIdempotencyStore } from './store.js';
import { writeQueue } from './write-queue.js';

/** The drizzle transaction a libSQL handler receives. */
// biome-ignore lint/suspicious/noExplicitAny: the handler may use any schema of the app's
export type LibsqlHandlerTransaction = SQLiteTransaction<'async', ResultSet, any, any>;

/**
 * The transactional form on libSQL: the handler's writes and the stored answer commit in one
 * interactive `write` transaction (`BEGIN IMMEDIATE`) on the store's client, so the app's tables
 * must live in the same database as the keys table. Unlike better-sqlite3, the handler may be
 * asynchronous: `async (tx) => result`.
 *
 * The transaction holds the database's write lock from its first statement to its commit. The
 * answer is recorded in the store's own table (`store.table`) by an `UPDATE` of the owner's
 * pending row (and attempt, with leases) on the transaction itself, as its last statement; if a
 * takeover committed before the transaction began, it matches nothing and everything rolls back.
 *
 * The transactions and the store's writes (claims, releases, lease renewals of other calls) take
 * turns in one queue per client, so overlapping calls never wait on a lock held in this process:
 * each claim or release waits, as a promise, for the transaction before it to commit, and the
 * transactions run one after another, as SQLite runs writers anyway.
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
  return {
    store,
    synchronous: false,
    run: (owner, handler, record) =>
      runFenced(
        // drizzle opens libSQL's default `write` transaction: BEGIN IMMEDIATE.
        (body) => queued(() => store.db.transaction(body)),
        handler,
        async (tx, result) => {
          const done = await tx
            .update(table)
            .set({ status: KeyStatus.done, response: record(result) })
            .where(ownerRow(table, owner.key, owner.digest, owner.attempt));
          return done.rowsAffected;
        },
      ),
  };
}
