import { leaseHolderRow, ownerRow } from '../core/key-conditions.js';
import { interactiveStepRecorder } from '../core/step-recorders.js';
import { type StepLog, type StepLogOptions, stepLog } from '../core/steps.js';
import { pgRollbackRetry } from './rolled-back.js';
import type { PgIdempotencyStore } from './store.js';
import type { PgHandlerTransaction } from './transaction.js';

// How many times a transactional step runs when PostgreSQL rolls it back on its own (a
// serialization failure, a deadlock): as `pgTransaction`'s default.
const STEP_ATTEMPTS = 3;

/**
 * The step log on PostgreSQL (node-postgres, postgres-js, PGlite): `makeIdempotent`'s `steps`
 * option. Each step's record is one fenced `UPDATE` of the key's row; a transactional step
 * (`step.tx`) runs its writes and that `UPDATE` in one transaction on the store's database, run
 * again in place (up to 3 times) when PostgreSQL rolls it back on its own.
 *
 * @param store - the store the keys are kept in
 * @param options - the secret of the derived keys and the size cap of a step's result
 * @throws `InvalidOptionError` for a missing or short secret or a bad `maxStepBytes`
 */
export function pgSteps(
  store: PgIdempotencyStore<unknown>,
  options: StepLogOptions,
): StepLog<PgHandlerTransaction> {
  const { table } = store;
  return stepLog(
    interactiveStepRecorder<PgHandlerTransaction, PgIdempotencyStore<unknown>['db']>({
      store,
      async read(key, digest) {
        const [row] = await store.db
          .select({ steps: table.steps })
          .from(table)
          .where(ownerRow(table, key, digest));
        return row?.steps ?? null;
      },
      async record(on, owner, stored) {
        const written = await on
          .update(table)
          .set({ steps: stored })
          .where(leaseHolderRow(table, owner.key, owner.fingerprint, owner.fencingToken))
          .returning({ id: table.id });
        return written.length;
      },
      transaction: (body) => store.db.transaction(body),
      rollbackRetry: (key) => pgRollbackRetry(key, STEP_ATTEMPTS),
    }),
    options,
  );
}
