import type { TransactionOf } from '../core/drizzle-types.js';
import { synchronousStepRecorder } from '../core/step-recorders.js';
import { type StepLog, type StepLogOptions, stepLog } from '../core/steps.js';
import { drizzleSqliteStepStatements } from '../sqlite-dialect/step-statements.js';
import type { AnyBunSqliteDatabase } from './client.js';
import type { BunSqliteIdempotencyStore } from './store.js';

/** The drizzle transaction a bun:sqlite transactional step receives. */
export type BunSqliteHandlerTransaction = TransactionOf<AnyBunSqliteDatabase>;

/**
 * The step log on bun:sqlite (under Bun): `makeIdempotent`'s `steps` option. Each step's record is
 * one fenced `UPDATE` of the key's row; a transactional step (`step.tx`) runs its writes and that
 * `UPDATE` in one `BEGIN IMMEDIATE` transaction on the store's connection, so the app's tables must
 * live in the store's database file, and the step's function is synchronous.
 *
 * @param store - the store the keys are kept in
 * @param options - the secret of the derived keys and the size cap of a step's result
 * @throws `InvalidOptionError` for a missing or short secret or a bad `maxStepBytes`
 */
export function bunSqliteSteps(
  store: BunSqliteIdempotencyStore<unknown>,
  options: StepLogOptions,
): StepLog<BunSqliteHandlerTransaction> {
  const { db, table } = store;
  return stepLog(
    synchronousStepRecorder<BunSqliteHandlerTransaction>({
      store,
      runtime: 'bun:sqlite',
      ...drizzleSqliteStepStatements(db, table),
      transaction: (body) => db.transaction(body, { behavior: 'immediate' }),
    }),
    options,
  );
}
