import { sql } from 'drizzle-orm';
import type { BatchItem } from 'drizzle-orm/batch';
import { InvalidOptionError } from '../core/errors.js';
import { ownerRow } from '../core/key-conditions.js';
import { KeyStatus } from '../core/status.js';
import { failedBatchOutcome, type TransactionRunner } from '../core/transaction-runner.js';
import type { AnyNeonHttpDatabase } from './neon-migrate.js';
import type { PgIdempotencyStore } from './store.js';

/**
 * What a neon-http handler receives in the transactional form: neon-http has no interactive
 * transaction, so the handler's writes are queued and run, in order, in the one `batch` that
 * records the answer.
 */
export interface NeonHttpHandlerBatch {
  /** The store's drizzle database. Reads run at once, outside the batch; build writes with it. */
  readonly db: AnyNeonHttpDatabase;
  /**
   * Queues drizzle queries (`db.insert(…)`, `db.update(…)`, `db.execute(sql\`…\`)`, …; not
   * awaited): they commit with the answer or not at all.
   */
  add(...queries: BatchItem<'pg'>[]): void;
}

/**
 * The transactional form on neon-http: the handler queues its writes with `tx.add(…)`, and they
 * run in one `db.batch([...])` with the statement that records the answer. That statement is an
 * `UPDATE` of the owner's pending row (and its fencing token) wrapped in a query that divides
 * by the number of rows it changed, so it fails when the row is no longer the owner's. Neon runs
 * a batch as one transaction, so a takeover or a release that happened meanwhile rolls back the
 * handler's writes with the answer: both commit or neither does. The app's tables must be in the
 * same database as the keys table. When the batch fails, the outcome is read from the row: done
 * under the owner's token means the batch committed and only its HTTP answer was lost, so the run
 * committed (see `failedBatchOutcome`).
 *
 * The handler's reads (`tx.db.select()…`) run before the batch, not inside it: what it writes
 * must not depend on a read staying true until the commit, unless the write itself checks it.
 *
 * @param store - a store built over the neon-http database (`new PgIdempotencyStore(db)`)
 * @throws {@link InvalidOptionError} when the store's database is not a neon-http one
 * @example
 * ```ts
 * import { neon } from '@neondatabase/serverless';
 * import { sql } from 'drizzle-orm';
 * import { drizzle } from 'drizzle-orm/neon-http';
 * import { makeIdempotent } from 'drizzle-idempotency/function';
 * import { neonHttpTransaction, PgIdempotencyStore } from 'drizzle-idempotency/pg';
 *
 * const store = new PgIdempotencyStore(drizzle({ client: neon(process.env.DATABASE_URL ?? '') }));
 * const credit = makeIdempotent(
 *   async (tx, message: { id: string; amount: number }) => {
 *     tx.add(tx.db.execute(sql`UPDATE accounts SET balance = balance + ${message.amount}`));
 *     return { credited: message.amount };
 *   },
 *   { transaction: neonHttpTransaction(store), key: (message) => message.id },
 * );
 * ```
 */
export function neonHttpTransaction(
  store: PgIdempotencyStore<unknown>,
): TransactionRunner<NeonHttpHandlerBatch> {
  const { table } = store;
  const db = store.db as unknown as AnyNeonHttpDatabase;
  if (typeof (db as { batch?: unknown }).batch !== 'function') {
    throw new InvalidOptionError(
      'neonHttpTransaction needs a store over drizzle-orm/neon-http (a database with batch); use pgTransaction on other drivers',
    );
  }
  return {
    store,
    synchronous: false,
    run: async (owner, handler, record) => {
      const queued: BatchItem<'pg'>[] = [];
      const result = await handler({ db, add: (...queries) => queued.push(...queries) });
      const answer = db
        .update(table)
        .set({ status: KeyStatus.done, response: await record(result) })
        .where(ownerRow(table, owner.key, owner.fingerprint, owner.fencingToken))
        .returning({ id: table.id });
      // Division by zero (22012) when the UPDATE matched nothing: the batch rolls back whole.
      // drizzle puts the embedded UPDATE in parentheses itself.
      const fenced = db.execute(
        sql`WITH done AS ${answer} SELECT 1 / (SELECT count(*)::int FROM done) AS fenced`,
      );
      const statements: BatchItem<'pg'>[] = [...queued, fenced];
      try {
        await db.batch(statements as [BatchItem<'pg'>, ...BatchItem<'pg'>[]]);
        return { committed: true, result };
      } catch (error) {
        return failedBatchOutcome(store, owner, result, error);
      }
    },
  };
}
