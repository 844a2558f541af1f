import { KeyStatus } from './status.js';
import type { IdempotencyStore, LeasedIdempotencyStore, MaybePromise } from './store.js';

/** The call that owns a key: its key, its payload fingerprint and its fencing token. */
export interface KeyOwner {
  /** The idempotency key. */
  readonly key: string;
  /** The fingerprint the key was claimed with. */
  readonly fingerprint: string;
  /** The fencing token of the claim, from `acquire`. */
  readonly fencingToken: number;
}

/**
 * What a batch that failed (or whose answer never arrived) committed, decided from what the
 * database holds, for a runner without an interactive transaction (a batch with a guard
 * statement), whose batch commits whole or not at all:
 *
 * - the key's row is done with the owner's fingerprint and fencing token: the batch committed and
 *   only its acknowledgement was lost (a dropped HTTP response), since no one else can record an
 *   answer under this owner's token: `{ committed: true, result }`;
 * - it is still the owner's pending row: the batch did not commit because one of the handler's
 *   statements failed (or the request never reached the database), so `error` is rethrown;
 * - anything else (gone, another fingerprint or token): the guard refused a row that is no longer
 *   the owner's and the batch rolled back: `{ committed: false }`.
 *
 * Throws what the store throws when the row cannot be read.
 *
 * @param store - the store whose table the runner records in
 * @param owner - the claim the batch ran for
 * @param result - what the handler returned
 * @param error - the batch's error
 */
export async function failedBatchOutcome<R>(
  store: Pick<IdempotencyStore<unknown>, 'get'>,
  owner: KeyOwner,
  result: R,
  error: unknown,
): Promise<TransactionOutcome<R>> {
  const row = await store.get(owner.key);
  const owners =
    row !== null &&
    row.fingerprint === owner.fingerprint &&
    row.fencingToken === owner.fencingToken;
  if (owners && row.status === KeyStatus.done) return { committed: true, result };
  if (owners && row.status === KeyStatus.pending) throw error;
  return { committed: false };
}

/** What {@link TransactionRunner.run} committed. */
export type TransactionOutcome<R> =
  | { readonly committed: true; readonly result: R }
  | {
      /**
       * The key's row was no longer this owner's pending row (taken over, or released by hand),
       * so the transaction rolled back: none of the handler's writes and no answer were committed.
       */
      readonly committed: false;
    };

/**
 * Runs a handler's database writes and the recording of its answer in **one** transaction: either
 * both commit or neither does. Made per dialect over the store's own database
 * (`sqliteTransaction(store)` from `drizzle-idempotency/sqlite`, `libsqlTransaction(store)` from
 * `drizzle-idempotency/libsql`, `pgTransaction(store)` from `drizzle-idempotency/pg`,
 * `mysqlTransaction(store)` from `drizzle-idempotency/mysql`). The claim engine's
 * `Ownership.transact` drives it for `makeIdempotent` and the HTTP layer alike.
 *
 * The key must already be claimed (pending, owned by `owner`) in its own earlier commit, so
 * duplicates see it as in progress instead of waiting on a lock.
 *
 * @typeParam TX - the drizzle transaction the handler receives
 */
export interface TransactionRunner<TX> {
  /** The store whose table the answer is recorded in; phase 1, replays and releases go through it. */
  readonly store: LeasedIdempotencyStore<unknown>;
  /**
   * Whether handlers must be synchronous: better-sqlite3 transactions cannot span an `await`.
   * A synchronous runner refuses (and rolls back) a handler that returns a promise.
   */
  readonly synchronous: boolean;
  /**
   * Opens a transaction, runs `handler(tx)`, turns its result into the stored JSON text with
   * `record`, and marks the owner's pending row done with it, then commits. If the row is no
   * longer the owner's pending row (a takeover raised its fencing token, or it was released), rolls
   * back and returns `{ committed: false }`. If `handler` or `record` throws, rolls back and
   * rethrows: nothing of the handler's is committed and the key is still pending. `record`
   * answers the stored value (sealed, with encryption on): at once for a `synchronous` runner,
   * maybe a promise for the others.
   */
  run<R>(
    owner: KeyOwner,
    handler: (tx: TX) => R | Promise<R>,
    record: (result: R) => MaybePromise<string>,
  ): Promise<TransactionOutcome<R>>;
}

// Thrown inside the transaction callback to make the driver roll back, then caught outside.
class OwnershipLost extends Error {}

/**
 * The body of an asynchronous runner: in `transaction`, runs `handler(tx)` and then
 * `recordAnswer(tx, result)`, which marks the owner's row done and returns how many rows it
 * changed. Anything but one means the row is no longer the owner's: the whole transaction rolls
 * back and the outcome is `{ committed: false }`. What `handler` or `recordAnswer` throws rolls
 * back and is rethrown.
 */
export async function runFenced<TX, R>(
  transaction: <T>(body: (tx: TX) => Promise<T>) => Promise<T>,
  handler: (tx: TX) => R | Promise<R>,
  recordAnswer: (tx: TX, result: R) => Promise<number>,
): Promise<TransactionOutcome<R>> {
  try {
    const result = await transaction(async (tx) => {
      const result = await handler(tx);
      if ((await recordAnswer(tx, result)) !== 1) throw new OwnershipLost();
      return result;
    });
    return { committed: true, result };
  } catch (error) {
    if (error instanceof OwnershipLost) return { committed: false };
    throw error;
  }
}
