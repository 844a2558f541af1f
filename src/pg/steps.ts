import { leaseHolderRow, ownerRow } from '../core/key-conditions.js';
import { runRetryingRollbacks } from '../core/rolled-back.js';
import { type StepLog, type StepLogOptions, stepLog } from '../core/steps.js';
import type { KeyOwner } from '../core/transaction-runner.js';
import { runFenced } from '../core/transaction-runner.js';
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
  const owned = (owner: KeyOwner) =>
    leaseHolderRow(table, owner.key, owner.fingerprint, owner.fencingToken);
  return stepLog(
    {
      store,
      synchronous: false,
      async read(key, digest) {
        const [row] = await store.db
          .select({ steps: table.steps })
          .from(table)
          .where(ownerRow(table, key, digest));
        return row?.steps ?? null;
      },
      async write(owner, text) {
        const written = await store.db
          .update(table)
          .set({ steps: text })
          .where(owned(owner))
          .returning({ id: table.id });
        return written.length === 1;
      },
      transact: (owner, body, text) =>
        runRetryingRollbacks(
          () =>
            runFenced(
              (inner) => store.db.transaction(inner),
              (tx: PgHandlerTransaction) => body(tx),
              async (tx, result) => {
                const written = await tx
                  .update(table)
                  .set({ steps: text(result) })
                  .where(owned(owner))
                  .returning({ id: table.id });
                return written.length;
              },
            ),
          pgRollbackRetry(owner.key, STEP_ATTEMPTS),
        ),
    },
    options,
  );
}
