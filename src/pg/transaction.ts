import type { PgQueryResultHKT, PgTransaction } from 'drizzle-orm/pg-core';
import { ownerRow } from '../core/key-conditions.js';
import { KeyStatus } from '../core/status.js';
import { runFenced, type TransactionRunner } from '../function/transaction.js';
import { keys as defaultKeys, type PgKeysTable } from './schema.js';
import type { PgIdempotencyStore } from './store.js';

/** The drizzle transaction a PostgreSQL handler receives, whatever the driver. */
// biome-ignore lint/suspicious/noExplicitAny: the handler may use any schema of the app's
export type PgHandlerTransaction = PgTransaction<PgQueryResultHKT, any, any>;

/** Options of {@link pgTransaction}. */
export interface PgTransactionOptions {
  /** The store's keys table (`pgKeysTable({ name, schema })`), when it is not the default `keys` in `public`. */
  readonly table?: PgKeysTable;
}

/**
 * The transactional form on PostgreSQL: the handler's writes and the stored answer commit in one
 * `db.transaction(async (tx) => …)` on the store's database (node-postgres, postgres-js or
 * PGlite), so the app's tables must be reachable from the same database.
 *
 * The answer is recorded by an `UPDATE` of the owner's pending row (and attempt, with leases) as
 * the transaction's last statement. A takeover that committed first makes it match nothing, and
 * the whole transaction rolls back; one that comes later waits on the row lock and then finds the
 * row done. Use only `tx` in the handler: on PGlite (one connection) the root database would wait
 * for the transaction to end.
 *
 * @param store - the store the keys are kept in; the transaction runs on its database
 * @param options - the store's table, when not the default
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
  const table = options.table ?? defaultKeys;
  return {
    store,
    synchronous: false,
    run: (owner, handler, record) =>
      runFenced(
        (body) => store.db.transaction(body),
        handler,
        async (tx, result) => {
          const done = await tx
            .update(table)
            .set({ status: KeyStatus.done, response: record(result) })
            .where(ownerRow(table, owner.key, owner.digest, owner.attempt))
            .returning({ id: table.id });
          return done.length;
        },
      ),
  };
}
