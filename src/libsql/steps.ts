import { leaseHolderRow, ownerRow } from '../core/key-conditions.js';
import { interactiveStepRecorder } from '../core/step-recorders.js';
import { type StepLog, type StepLogOptions, stepLog } from '../core/steps.js';
import type { AnyLibsqlDatabase, LibsqlIdempotencyStore } from './store.js';
import type { LibsqlHandlerTransaction } from './transaction.js';
import { writeQueue } from './write-queue.js';

/**
 * The step log on libSQL (a local file, `:memory:`, or a sqld / Turso server): `makeIdempotent`'s
 * `steps` option. Each step's record is one fenced `UPDATE` of the key's row; a transactional step
 * (`step.tx`) runs its writes and that `UPDATE` in one `BEGIN IMMEDIATE` transaction on the
 * store's client, queued behind the client's other writes as `libsqlTransaction` is.
 *
 * @param store - the store the keys are kept in
 * @param options - the secret of the derived keys and the size cap of a step's result
 * @throws `InvalidOptionError` for a missing or short secret or a bad `maxStepBytes`
 * @example
 * ```ts
 * import { makeIdempotent, type Step } from 'drizzle-idempotency/function';
 * import { type LibsqlHandlerTransaction, libsqlSteps, openLibsqlStore } from 'drizzle-idempotency/libsql';
 *
 * const store = await openLibsqlStore('file:app.db');
 * const pay = makeIdempotent(
 *   async (step: Step<LibsqlHandlerTransaction>, id: string) => step('charge', ({ key }) => `ch_${key}`),
 *   { steps: libsqlSteps(store, { secret: 'a secret of 16 bytes or more' }), key: (id) => `pay:${id}` },
 * );
 * ```
 */
export function libsqlSteps(
  store: LibsqlIdempotencyStore<unknown>,
  options: StepLogOptions,
): StepLog<LibsqlHandlerTransaction> {
  const { table, db } = store;
  const queued = writeQueue(db.$client);
  const update = async (
    on: AnyLibsqlDatabase | LibsqlHandlerTransaction,
    stored: string,
    owner: {
      key: string;
      fingerprint: string;
      fencingToken: number;
    },
  ) => {
    const written = await on
      .update(table)
      .set({ steps: stored })
      .where(leaseHolderRow(table, owner.key, owner.fingerprint, owner.fencingToken));
    return written.rowsAffected;
  };
  return stepLog(
    interactiveStepRecorder<LibsqlHandlerTransaction, AnyLibsqlDatabase>({
      store,
      async read(key, digest) {
        const [row] = await db
          .select({ steps: table.steps })
          .from(table)
          .where(ownerRow(table, key, digest));
        return row?.steps ?? null;
      },
      // A write on the client waits its turn behind an open transaction, which holds the lock;
      // inside the transaction it is that transaction's own statement.
      record: (on, owner, stored) =>
        on === db ? queued(() => update(on, stored, owner)) : update(on, stored, owner),
      // drizzle opens libSQL's default `write` transaction: BEGIN IMMEDIATE.
      transaction: (body) => queued(() => db.transaction(body)),
    }),
    options,
  );
}
