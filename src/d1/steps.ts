import { leaseHolderRow, ownerRow } from '../core/key-conditions.js';
import { type StepLog, type StepLogOptions, stepLog } from '../core/steps.js';
import type { KeyOwner } from '../core/transaction-runner.js';
import type { D1IdempotencyStore } from './store.js';
import { type D1HandlerBatch, runFencedBatch } from './transaction.js';

/**
 * The step log on D1: `makeIdempotent`'s `steps` option. Each step's record is one fenced `UPDATE`
 * of the key's row. D1 has no interactive transaction, so a transactional step (`step.tx`) has the
 * batch form of `d1Transaction`: its function receives a {@link D1HandlerBatch}, reads at once
 * through `batch.db`, and queues its writes with `batch.add(…)`; they run in one D1 `batch` with
 * the step's record and a guard, and commit together or not at all. A read inside the step sees
 * the database before the batch, not the step's own queued writes.
 *
 * @param store - the store the keys are kept in
 * @param options - the secret of the derived keys and the size cap of a step's result
 * @throws `InvalidOptionError` for a missing or short secret or a bad `maxStepBytes`
 */
export function d1Steps(
  store: D1IdempotencyStore<unknown>,
  options: StepLogOptions,
): StepLog<D1HandlerBatch> {
  const { db, table } = store;
  const fenced = (owner: KeyOwner, stored: string) =>
    db
      .update(table)
      .set({ steps: stored })
      .where(leaseHolderRow(table, owner.key, owner.fingerprint, owner.fencingToken));
  return stepLog(
    {
      store,
      synchronous: false,
      async read(key, digest) {
        const [row] = await db
          .select({ steps: table.steps })
          .from(table)
          .where(ownerRow(table, key, digest));
        return row?.steps ?? null;
      },
      write: async (owner, stored) => (await fenced(owner, stored)).meta.changes === 1,
      transact: async (owner, body, stored) => {
        let written: string | undefined;
        const { result, failed } = await runFencedBatch(
          db,
          body,
          async (result) => {
            written = await stored(result);
            return written;
          },
          (text) => fenced(owner, text),
        );
        if (failed === undefined) return { committed: true, result };
        // Decided from what the row holds, as for a failed answer batch: our record there means
        // the batch committed and only its answer was lost; the owner's row without it means a
        // statement of the step failed; no owner's row means the guard refused the batch.
        const [row] = await db
          .select({ steps: table.steps })
          .from(table)
          .where(leaseHolderRow(table, owner.key, owner.fingerprint, owner.fencingToken));
        if (row === undefined) return { committed: false };
        if (written !== undefined && row.steps === written) return { committed: true, result };
        throw failed.error;
      },
    },
    options,
  );
}
