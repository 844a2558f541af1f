import type { PlanetScaleDatabase } from 'drizzle-orm/planetscale-serverless';
import type { TransactionOf } from '../core/drizzle-types.js';
import { ownerRow } from '../core/key-conditions.js';
import { DEFAULT_TRANSACTION_ATTEMPTS, runRetryingRollbacks } from '../core/rolled-back.js';
import { KeyStatus } from '../core/status.js';
import { runFenced, type TransactionRunner } from '../core/transaction-runner.js';
import type { AnyMysqlDatabase } from './client.js';
import { writeHeader } from './compile.js';
import { mysqlRollbackRetry } from './errors.js';
import { MysqlIdempotencyStore, type MysqlStoreOptions } from './store.js';

/** A drizzle database over PlanetScale's serverless driver, whatever its schema. */
// biome-ignore lint/suspicious/noExplicitAny: the store uses its own table, never the app's schema
export type AnyPlanetscaleDatabase = PlanetScaleDatabase<any>;

/**
 * The drizzle transaction a PlanetScale handler receives: the one a PlanetScale database's
 * `transaction` hands its callback, in either major of drizzle-orm.
 */
export type PlanetscaleHandlerTransaction = TransactionOf<AnyPlanetscaleDatabase>;

/**
 * The idempotency store over PlanetScale's serverless driver (`@planetscale/database` with
 * `drizzle-orm/planetscale-serverless`): the MySQL store, reading that driver's answers (a write's
 * `rowsAffected` and `insertId`, a duplicate key as the `(errno 1062)` in a `DatabaseError`'s
 * message, VARBINARY keys as `Uint8Array`s) and, since PlanetScale is Vitess, with `vitess: true`
 * unless told otherwise (see {@link MysqlStoreOptions.vitess}). The table must exist: use
 * `applyPlanetscaleMigrations`, or a deploy request with the shipped `drizzle/mysql` SQL.
 *
 * @typeParam T - the type of the stored responses
 * @example
 * ```ts
 * import { Client } from '@planetscale/database';
 * import { drizzle } from 'drizzle-orm/planetscale-serverless';
 * import { PlanetscaleIdempotencyStore } from 'drizzle-idempotency/mysql';
 *
 * const db = drizzle({ client: new Client({ url: process.env.DATABASE_URL ?? '' }) });
 * const store = new PlanetscaleIdempotencyStore<{ receipt: number }>(db);
 * ```
 */
export class PlanetscaleIdempotencyStore<T = unknown> extends MysqlIdempotencyStore<T> {
  readonly #planetscale: AnyPlanetscaleDatabase;

  /**
   * @param db - a drizzle database over PlanetScale's serverless driver
   * @param options - see {@link MysqlStoreOptions}; `vitess` defaults to `true`
   */
  constructor(db: AnyPlanetscaleDatabase, options: MysqlStoreOptions = {}) {
    // Every statement the store sends goes through drizzle's MySQL query builders, which this
    // database shares with mysql2's; the answers' shapes are read by writeHeader and queryRows.
    super(db as unknown as AnyMysqlDatabase, { vitess: true, ...options });
    this.#planetscale = db;
  }

  /** The PlanetScale drizzle database the store runs on; `planetscaleTransaction` runs there. */
  get planetscale(): AnyPlanetscaleDatabase {
    return this.#planetscale;
  }
}

/**
 * The transactional form over PlanetScale's serverless driver: the handler's writes and the
 * stored answer commit in one `db.transaction(async (tx) => …)` (the driver's session, kept by
 * the service between requests), the answer recorded last by an `UPDATE` of the owner's pending
 * row (and its fencing token); when it changes no row (a takeover or a release came first),
 * the whole transaction rolls back. As with `mysqlTransaction`, a transaction rolled back as a
 * deadlock victim (or after a lock wait timeout) runs again in place, handler included, up to 3
 * times, then rejects with `TransactionDeadlockError` (or `TransactionRolledBackError`), its key
 * released. The driver sets no isolation level: the server's default applies.
 *
 * @param store - the store the keys are kept in; the transaction runs on its database
 * @example
 * ```ts
 * import { sql } from 'drizzle-orm';
 * import { makeIdempotent } from 'drizzle-idempotency/function';
 * import { planetscaleTransaction } from 'drizzle-idempotency/mysql';
 *
 * const credit = makeIdempotent(
 *   async (tx, message: { id: string; amount: number }) => {
 *     await tx.execute(sql`UPDATE accounts SET balance = balance + ${message.amount}`);
 *     return { credited: message.amount };
 *   },
 *   { transaction: planetscaleTransaction(store), key: (message) => message.id },
 * );
 * ```
 */
export function planetscaleTransaction(
  store: PlanetscaleIdempotencyStore<unknown>,
): TransactionRunner<PlanetscaleHandlerTransaction> {
  const { table } = store;
  return {
    store,
    synchronous: false,
    run: (owner, handler, record) =>
      runRetryingRollbacks(
        () =>
          runFenced(
            (body) => store.planetscale.transaction(body),
            handler,
            async (tx, result) =>
              writeHeader(
                await tx
                  .update(table)
                  .set({ status: KeyStatus.done, response: await record(result) })
                  .where(ownerRow(table, owner.key, owner.fingerprint, owner.fencingToken)),
              ).affectedRows,
          ),
        mysqlRollbackRetry(owner.key, DEFAULT_TRANSACTION_ATTEMPTS),
      ),
  };
}
