import type { ResultSet } from '@libsql/client';
import type { SQLiteTransaction } from 'drizzle-orm/sqlite-core';
import { ownerRow } from '../core/key-conditions.js';
import { KeyStatus } from '../core/status.js';
import { runFenced, type TransactionRunner } from '../function/transaction.js';
import { keys as defaultKeys, type SqliteKeysTable } from './schema.js';
import type { LibsqlIdempotencyStore } from './store.js';

/** The drizzle transaction a libSQL handler receives. */
// biome-ignore lint/suspicious/noExplicitAny: the handler may use any schema of the app's
export type LibsqlHandlerTransaction = SQLiteTransaction<'async', ResultSet, any, any>;

/** Options of {@link libsqlTransaction}. */
export interface LibsqlTransactionOptions {
  /** The store's keys table (`sqliteKeysTable(name)`), when it is not the default `keys`. */
  readonly table?: SqliteKeysTable;
}

/**
 * The transactional form on libSQL: the handler's writes and the stored answer commit in one
 * interactive `write` transaction (`BEGIN IMMEDIATE`) on the store's client, so the app's tables
 * must live in the same database as the keys table. Unlike better-sqlite3, the handler may be
 * asynchronous: `async (tx) => result`.
 *
 * The transaction holds the database's write lock from its first statement to its commit, so no
 * other call can take the key over while it runs: the lease is not renewed meanwhile (a renewal
 * would only wait for that lock). The answer is recorded by an `UPDATE` of the owner's pending row
 * (and attempt, with leases) on the transaction itself, as its last statement; if a takeover
 * committed before the transaction began, it matches nothing and everything rolls back.
 *
 * Use only `tx` in the handler, never the store or the root database: libSQL's local client
 * waits for a lock synchronously, so a statement on another connection would stall the whole
 * process until the busy timeout while this transaction holds the lock.
 *
 * @param store - the store the keys are kept in; the transaction runs on its client
 * @param options - the store's table, when not the default
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
  options: LibsqlTransactionOptions = {},
): TransactionRunner<LibsqlHandlerTransaction> {
  const table = options.table ?? defaultKeys;
  return {
    store,
    synchronous: false,
    holdsWriteLock: true,
    run: (owner, handler, record) =>
      runFenced(
        // drizzle opens libSQL's default `write` transaction: BEGIN IMMEDIATE.
        (body) => store.db.transaction(body),
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
