import { and, eq, sql } from 'drizzle-orm';
import { KeyStatus } from '../core/status.js';
import { synchronousStepRecorder } from '../core/step-recorders.js';
import { type StepLog, type StepLogOptions, stepLog } from '../core/steps.js';
import type { SqliteIdempotencyStore } from './store.js';
import type { SqliteHandlerTransaction } from './transaction.js';

const p = sql.placeholder;

/**
 * The step log on SQLite (better-sqlite3): `makeIdempotent`'s `steps` option. Each step's record
 * is one fenced `UPDATE` of the key's row on the store's connection; a transactional step
 * (`step.tx`) runs its writes and that `UPDATE` in one `BEGIN IMMEDIATE` transaction, so the app's
 * tables must live in the store's database file, and the step's function is synchronous (as in
 * {@link sqliteTransaction}).
 *
 * @param store - the store the keys are kept in
 * @param options - the secret of the derived keys and the size cap of a step's result
 * @throws `InvalidOptionError` for a missing or short secret or a bad `maxStepBytes`
 * @example
 * ```ts
 * import { makeIdempotent } from 'drizzle-idempotency/function';
 * import { openSqliteStore, sqliteSteps } from 'drizzle-idempotency/sqlite';
 *
 * const store = openSqliteStore('./app.db');
 * const pay = makeIdempotent(
 *   async (step, order: { id: string; cents: number }) => {
 *     const charge = await step('charge', ({ key }) => ({ id: `ch_${key.slice(0, 8)}` }));
 *     return { charge: charge.id };
 *   },
 *   { steps: sqliteSteps(store, { secret: 'a secret of 16 bytes or more' }), key: (order) => order.id },
 * );
 * await pay({ id: 'o-1', cents: 500 });
 * store.close();
 * ```
 */
export function sqliteSteps(
  store: SqliteIdempotencyStore<unknown>,
  options: StepLogOptions,
): StepLog<SqliteHandlerTransaction> {
  const { table } = store;
  const pendingRow = [
    eq(table.id, p('id')),
    eq(table.fingerprint, p('fingerprint')),
    eq(table.status, KeyStatus.pending),
  ];
  // Prepared once; they run on the store's connection, so inside an open transaction too.
  const writeStatement = store.db
    .update(table)
    .set({ steps: sql<string>`${p('steps')}` })
    .where(
      and(
        ...pendingRow,
        // The fencing token: a takeover since the claim raised it, and this matches nothing.
        eq(table.attempt, p('attempt')),
        eq(table.unrecorded, false),
      ),
    )
    .prepare();
  const readStatement = store.db
    .select({ steps: table.steps })
    .from(table)
    .where(and(...pendingRow))
    .prepare();
  return stepLog(
    synchronousStepRecorder<SqliteHandlerTransaction>({
      store,
      runtime: 'SQLite',
      read: (key, digest) => readStatement.get({ id: key, fingerprint: digest })?.steps ?? null,
      record: (owner, stored) =>
        writeStatement.run({
          id: owner.key,
          fingerprint: owner.fingerprint,
          steps: stored,
          attempt: owner.fencingToken,
        }).changes === 1,
      transaction: (body) => store.db.transaction(body, { behavior: 'immediate' }),
    }),
    options,
  );
}
