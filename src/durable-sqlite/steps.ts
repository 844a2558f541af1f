import { synchronousStepRecorder } from '../core/step-recorders.js';
import { type StepLog, type StepLogOptions, stepLog } from '../core/steps.js';
import { drizzleSqliteStepStatements } from '../sqlite-dialect/step-statements.js';
import type { DurableSqliteIdempotencyStore } from './store.js';
import type { DurableSqliteHandlerTransaction } from './transaction.js';

/**
 * The step log in a Durable Object's SQLite storage: `makeIdempotent`'s `steps` option. Each
 * step's record is one fenced `UPDATE` of the key's row; a transactional step (`step.tx`) runs its
 * writes and that `UPDATE` in one `transactionSync`, so the step's function is synchronous.
 *
 * @param store - the store the keys are kept in
 * @param options - the secret of the derived keys and the size cap of a step's result
 * @throws `InvalidOptionError` for a missing or short secret or a bad `maxStepBytes`
 */
export function durableSqliteSteps(
  store: DurableSqliteIdempotencyStore<unknown>,
  options: StepLogOptions,
): StepLog<DurableSqliteHandlerTransaction> {
  const { db, table } = store;
  return stepLog(
    synchronousStepRecorder<DurableSqliteHandlerTransaction>({
      store,
      runtime: 'Durable Object',
      ...drizzleSqliteStepStatements(db, table),
      transaction: (body) => db.transaction(body),
    }),
    options,
  );
}
