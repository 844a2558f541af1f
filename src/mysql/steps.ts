import { leaseHolderRow, ownerRow } from '../core/key-conditions.js';
import { interactiveStepRecorder } from '../core/step-recorders.js';
import { type StepLog, type StepLogOptions, stepLog } from '../core/steps.js';
import { mysqlRollbackRetry } from './errors.js';
import type { MysqlIdempotencyStore } from './store.js';
import type { MysqlHandlerTransaction } from './transaction.js';

// How many times a transactional step runs when the server rolls it back on its own (a deadlock,
// a lock wait timeout): as `mysqlTransaction`'s default.
const STEP_ATTEMPTS = 3;

/**
 * The step log on MySQL and MariaDB (mysql2): `makeIdempotent`'s `steps` option. Each step's
 * record is one fenced `UPDATE` of the key's row; a transactional step (`step.tx`) runs its writes
 * and that `UPDATE` in one `read committed` transaction on the store's pool, run again in place
 * (up to 3 times) when the server rolls it back on its own.
 *
 * @param store - the store the keys are kept in
 * @param options - the secret of the derived keys and the size cap of a step's result
 * @throws `InvalidOptionError` for a missing or short secret or a bad `maxStepBytes`
 */
export function mysqlSteps(
  store: MysqlIdempotencyStore<unknown>,
  options: StepLogOptions,
): StepLog<MysqlHandlerTransaction> {
  const { table } = store;
  return stepLog(
    interactiveStepRecorder<MysqlHandlerTransaction, MysqlIdempotencyStore<unknown>['db']>({
      store,
      async read(key, digest) {
        const [row] = await store.db
          .select({ steps: table.steps })
          .from(table)
          .where(ownerRow(table, key, digest));
        return row?.steps ?? null;
      },
      async record(on, owner, stored) {
        const [written] = await on
          .update(table)
          .set({ steps: stored })
          .where(leaseHolderRow(table, owner.key, owner.fingerprint, owner.fencingToken));
        return written.affectedRows;
      },
      transaction: (body) => store.db.transaction(body, { isolationLevel: 'read committed' }),
      rollbackRetry: (key) => mysqlRollbackRetry(key, STEP_ATTEMPTS),
    }),
    options,
  );
}
