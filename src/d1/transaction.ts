import { ownerRow } from '../core/key-conditions.js';
import { KeyStatus } from '../core/status.js';
import { failedBatchOutcome, type TransactionRunner } from '../core/transaction-runner.js';
import type { SqliteStatement } from '../sqlite-dialect/compile.js';
import { type AnyD1Database, prepare } from './client.js';
import { keys as defaultKeys, type SqliteKeysTable } from './schema.js';
import type { D1IdempotencyStore } from './store.js';

/**
 * A drizzle write the batch can run: a query builder (`db.insert(…)`, `db.update(…)`, …, which
 * has `toSQL()`) or a raw statement (`db.run(sql\`…\`)`, which has `getQuery()`).
 */
export type D1Query =
  | { toSQL(): { sql: string; params: unknown[] } }
  | { getQuery(): { sql: string; params: unknown[] } };

/**
 * What a D1 handler receives in the transactional form: D1 has no interactive transaction, so the
 * handler's writes are queued and run, in order, in the one `batch` that records the answer.
 */
export interface D1HandlerBatch {
  /** The store's drizzle database. Reads run at once, outside the batch; build writes with it. */
  readonly db: AnyD1Database;
  /** Queues drizzle write queries (not awaited): they commit with the answer or not at all. */
  add(...queries: D1Query[]): void;
}

/** Options of {@link d1Transaction}. */
export interface D1TransactionOptions {
  /** The store's keys table (`sqliteKeysTable(name)`), when it is not the default `keys`. */
  readonly table?: SqliteKeysTable;
}

// The last statement of the batch: it fails, rolling the whole batch back, unless the fenced
// UPDATE just before it changed the owner's row. json('x') is malformed JSON: the one way to raise
// an error from a plain SELECT in SQLite.
const FENCE_GUARD: SqliteStatement = {
  sql: "SELECT CASE WHEN changes() = 1 THEN 1 ELSE json('x') END",
  args: [],
};

function bound(query: D1Query): SqliteStatement {
  const { sql, params } = 'toSQL' in query ? query.toSQL() : query.getQuery();
  return { sql, args: params };
}

/**
 * Runs `handler` on a {@link D1HandlerBatch}, then its queued writes, `fenced` (the UPDATE that
 * records on the owner's row) and the guard in one D1 `batch`: all commit, or none when the
 * UPDATE changed no row or any statement failed. `fenced` builds that UPDATE from the value
 * `stored` answers for the handler's result.
 *
 * @returns the handler's result, and the batch's error (the guard's when the row was no longer the
 *   owner's) when it did not commit or its answer was lost
 */
export async function runFencedBatch<R>(
  db: AnyD1Database,
  handler: (batch: D1HandlerBatch) => R | Promise<R>,
  stored: (result: R) => Promise<string>,
  fenced: (stored: string) => D1Query,
): Promise<{ readonly result: R; readonly failed?: { readonly error: unknown } }> {
  const queued: SqliteStatement[] = [];
  const result = await handler({
    db,
    add: (...queries) => {
      queued.push(...queries.map(bound));
    },
  });
  // Built only once the stored value is known, and never awaited: a drizzle query is a thenable,
  // and awaiting it would run it outside the batch.
  const write = bound(fenced(await stored(result)));
  const client = db.$client;
  try {
    await client.batch(
      [...queued, write, FENCE_GUARD].map((statement) => prepare(client, statement)),
    );
    return { result };
  } catch (error) {
    return { result, failed: { error } };
  }
}

/**
 * The transactional form on D1: the handler queues its writes with `tx.add(…)`, and they run in
 * one `batch` with the UPDATE that records the answer on the owner's pending row (and its fencing
 * token) and a guard statement that fails when that UPDATE changed no row. D1 runs a batch
 * as one transaction, so a takeover or a release that happened meanwhile rolls back the handler's
 * writes with the answer: both commit or neither does. The app's tables must live in the same D1
 * database as the keys table. When the batch fails, the outcome is read from the row: done under
 * the owner's token means the batch committed and only its answer was lost, so the run committed.
 *
 * The handler's reads (`tx.db.select()…`) run before the batch, not inside it: what it writes
 * must not depend on a read staying true until the commit, unless the write itself checks it.
 *
 * @param store - the store the keys are kept in; the batch runs on its binding
 * @param options - the store's table, when not the default
 * @example
 * ```ts
 * import { sql } from 'drizzle-orm';
 * import { drizzle } from 'drizzle-orm/d1';
 * import { d1Transaction, D1IdempotencyStore } from 'drizzle-idempotency/d1';
 * import { makeIdempotent } from 'drizzle-idempotency/function';
 *
 * export function creditor(env: { DB: D1Database }) {
 *   const store = new D1IdempotencyStore(drizzle(env.DB));
 *   return makeIdempotent(
 *     async (tx, message: { id: string; amount: number }) => {
 *       tx.add(tx.db.run(sql`UPDATE accounts SET balance = balance + ${message.amount}`));
 *       return { credited: message.amount };
 *     },
 *     { transaction: d1Transaction(store), key: (message) => message.id },
 *   );
 * }
 * ```
 */
export function d1Transaction(
  store: D1IdempotencyStore<unknown>,
  options: D1TransactionOptions = {},
): TransactionRunner<D1HandlerBatch> {
  const table = options.table ?? defaultKeys;
  const { db } = store;
  return {
    store,
    synchronous: false,
    run: async (owner, handler, record) => {
      const { result, failed } = await runFencedBatch(
        db,
        handler,
        async (result) => record(result),
        (response) =>
          db
            .update(table)
            .set({ status: KeyStatus.done, response })
            .where(ownerRow(table, owner.key, owner.fingerprint, owner.fencingToken)),
      );
      return failed === undefined
        ? { committed: true, result }
        : failedBatchOutcome(store, owner, result, failed.error);
    },
  };
}
