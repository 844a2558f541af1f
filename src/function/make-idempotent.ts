import { claim } from '../core/claim.js';
import { InvalidOptionError, UnserializableResponseError } from '../core/errors.js';
import { type JsonValue, serializeResponse } from '../core/json.js';
import type { Ownership } from '../core/ownership.js';
import { encodeResult } from '../core/result-encoding.js';
import { type Step, type StepLog, startSteps } from '../core/steps.js';
import type { TransactionOutcome, TransactionRunner } from '../core/transaction-runner.js';
import { assertKey } from '../core/validation.js';
import {
  CallInProgressError,
  CallOutcomeUnknownError,
  CallSupersededError,
  KeyReusedError,
  ResultExpiredError,
  ResultNotRecordedError,
  ResultNotStorableError,
} from './errors.js';
import {
  type MakeIdempotentOptions,
  type ResolvedFunctionOptions,
  resolveFunctionOptions,
  type SteppedOptions,
  type TransactionalOptions,
} from './options.js';

/** Runs the work of a call that owns its key and returns its result. */
type Execute<A extends unknown[], R> = (ownership: Ownership, args: A) => Promise<R>;

// The function failed, so its effect did not complete (or was rolled back): the key is released
// (only the pending row with this fingerprint) and a retry runs it again.
async function releaseAfter(ownership: Ownership, error: unknown): Promise<never> {
  await ownership.abandon(
    error,
    'the function failed and releasing its idempotency key failed too',
  );
  throw error;
}

// The function failed after recording steps: the key keeps them, its lease ended now, so a retry
// (or the completer) takes it over at once and goes on from the last recorded step.
async function lapseAfter(ownership: Ownership, error: unknown): Promise<never> {
  try {
    await ownership.lapse();
  } catch (lapseError) {
    throw new AggregateError(
      [error, lapseError],
      'the function failed and ending the lease of its idempotency key failed too',
    );
  }
  throw error;
}

// The result of a call that ran could not be recorded. The key is marked unrecorded, so it is
// never taken over (which would run the effect again) until an operator releases it.
async function notRecorded<R>(
  ownership: Ownership,
  result: R,
  reason: string,
  cause: unknown,
): Promise<never> {
  const { key } = ownership.owner;
  try {
    await ownership.markUnrecorded();
  } catch (markError) {
    throw new ResultNotRecordedError(
      key,
      result,
      `${reason}; marking the key unrecorded failed too, so it may be taken over once its lease lapses`,
      new AggregateError([cause, markError]),
    );
  }
  throw new ResultNotRecordedError(key, result, reason, cause);
}

// What the key holds when the function ran but its result could not be stored: an object no
// codec of ours writes (the default one's envelopes have `value` or `encoded`), read back before
// any codec sees it.
const NOT_STORABLE = '$resultNotStorable';

function notStorableReason(stored: unknown): string | undefined {
  if (typeof stored !== 'object' || stored === null || !Object.hasOwn(stored, NOT_STORABLE)) {
    return undefined;
  }
  const reason = (stored as Record<string, unknown>)[NOT_STORABLE];
  return typeof reason === 'string' ? reason : 'the result could not be stored';
}

// The function ran and returned a result the codec (or the store's JSON check) refused. Leaving
// the key pending would block every retry until an operator steps in, and releasing it would run
// the effect again: the key is recorded done with that outcome instead, which every retry gets.
async function notStorable<R>(
  ownership: Ownership,
  result: R,
  refusal: UnserializableResponseError,
): Promise<never> {
  const { key } = ownership.owner;
  let finished: boolean;
  try {
    finished = await ownership.finish({ [NOT_STORABLE]: refusal.message });
  } catch (error) {
    const reason = error instanceof Error ? error.message : String(error);
    return notRecorded(
      ownership,
      result,
      `${refusal.message}; recording that failed too: ${reason}`,
      new AggregateError([refusal, error]),
    );
  }
  if (!finished) {
    throw new ResultNotRecordedError(
      key,
      result,
      'the key was taken over or released while the function ran',
    );
  }
  throw new ResultNotStorableError(key, result, refusal.message, refusal);
}

// The arguments in their stored form, recorded with the first step for the completer; `undefined`
// when they have none, so the call still runs (only the completer cannot drive it).
function storedArgs(args: unknown[]): ReturnType<typeof encodeResult> | undefined {
  try {
    return encodeResult(args);
  } catch {
    return undefined;
  }
}

function plainExecute<A extends unknown[], R>(
  settings: ResolvedFunctionOptions<A, R>,
  fn: (...args: A) => R | Promise<R>,
): Execute<A, R>;
function plainExecute<TX, A extends unknown[], R>(
  settings: ResolvedFunctionOptions<A, R>,
  fn: (step: Step<TX>, ...args: A) => R | Promise<R>,
  steps: StepLog<TX>,
): Execute<A, R>;
function plainExecute<TX, A extends unknown[], R>(
  settings: ResolvedFunctionOptions<A, R>,
  fn: ((...args: A) => R | Promise<R>) | ((step: Step<TX>, ...args: A) => R | Promise<R>),
  steps?: StepLog<TX>,
): Execute<A, R> {
  return async (ownership, args) => {
    let result: R;
    let hasRecorded = () => false;
    try {
      if (steps === undefined) {
        result = await (fn as (...args: A) => R | Promise<R>)(...args);
      } else {
        // A taken-over key whose steps cannot be read (sealed under a key id the keyring lacks)
        // may hold recorded effects: it keeps them, as after a step that failed.
        hasRecorded = () => ownership.takenOver;
        const session = await startSteps(steps, ownership, storedArgs(args));
        hasRecorded = session.hasRecorded;
        result = await (fn as (step: Step<TX>, ...args: A) => R | Promise<R>)(
          session.step,
          ...args,
        );
      }
    } catch (error) {
      // Steps were recorded, some of them effects outside the database: deleting the key would
      // lose them, so its lease ends instead and the next owner goes on from them.
      if (hasRecorded()) return lapseAfter(ownership, error);
      return releaseAfter(ownership, error);
    }
    // From here the effect happened. A result that cannot be recorded keeps the key pending:
    // releasing it would let a retry run the effect a second time.
    ownership.stop();
    let finished: boolean;
    try {
      finished = await ownership.finish(settings.codec.serialize(result));
    } catch (error) {
      // The result's shape, not the store: nothing was written, and no retry would do better.
      if (error instanceof UnserializableResponseError) {
        return notStorable(ownership, result, error);
      }
      const reason = error instanceof Error ? error.message : String(error);
      return notRecorded(ownership, result, reason, error);
    }
    if (!finished) {
      // The row is no longer this call's: taken over after its lease lapsed, or released by hand.
      // Its new owner records its own result; nothing here is ours to mark.
      throw new ResultNotRecordedError(
        ownership.owner.key,
        result,
        'the key was taken over or released while the function ran',
      );
    }
    return result;
  };
}

function transactionalExecute<TX, A extends unknown[], R>(
  settings: ResolvedFunctionOptions<A, R>,
  runner: TransactionRunner<TX>,
  fn: (tx: TX, ...args: A) => R | Promise<R>,
): Execute<A, R> {
  return async (ownership, args) => {
    let outcome: TransactionOutcome<R>;
    try {
      outcome = await ownership.transact(
        runner,
        (tx) => fn(tx, ...args),
        // Checked inside the transaction: a result that cannot be stored rolls the writes back.
        (result) => serializeResponse(settings.codec.serialize(result)),
      );
    } catch (error) {
      // Rolled back: nothing of the function's was committed, so a retry may run it.
      return releaseAfter(ownership, error);
    }
    if (!outcome.committed) throw new CallSupersededError(ownership.owner.key);
    return outcome.result;
  };
}

// The mapping of the claim engine's outcomes to results and errors.
function wrap<A extends unknown[], R>(
  settings: ResolvedFunctionOptions<A, R>,
  execute: Execute<A, R>,
): (...args: A) => Promise<R> {
  return async (...args: A): Promise<R> => {
    const key = settings.key(...args);
    assertKey(key);
    const found = await claim(settings.store, key, settings.fingerprint(...args), settings);
    switch (found.status) {
      case 'acquired':
        return execute(found.ownership, args);
      case 'mismatch':
        throw new KeyReusedError(key, found.record, found.members);
      case 'expired':
        throw new ResultExpiredError(key, found.record);
      case 'replay': {
        const refused = notStorableReason(found.record.response);
        if (refused !== undefined) throw new ResultNotStorableError(key, undefined, refused);
        return settings.codec.deserialize(found.record.response as JsonValue);
      }
      case 'outcomeUnknown':
        throw new CallOutcomeUnknownError(key);
      case 'inProgress':
        throw new CallInProgressError(key, found.record, found.leaseUntil);
    }
  };
}

/**
 * Wraps an async function so that calls with the same key run it once within the retention
 * period: the first call runs it and stores its result, later calls with the same key and payload
 * return the stored result without running it. For queue consumers, webhooks and scheduled jobs.
 * The claim, the wait and the lease are the core claim engine's, shared with the HTTP layer; the
 * wrapper maps its outcomes to results and errors.
 *
 * ```
 *  call ─ key(args), fingerprint(payload(args))
 *     ▼
 *  claim the key ── new ──▶ run fn ─┬─ returns ─▶ store the result ─▶ return it
 *     │                             │     no stored form ─▶ key done, ResultNotStorableError
 *     │                             │     store fails ─▶ key stays pending, ResultNotRecordedError
 *     │                             └─ throws ──▶ release the key, rethrow
 *     ├─ done, same payload ─────▶ return the stored result (fn does not run),
 *     │                            or ResultNotStorableError if it had no stored form
 *     ├─ done, past retention ───▶ ResultExpiredError
 *     ├─ other payload ──────────▶ KeyReusedError
 *     └─ running elsewhere ──────▶ CallInProgressError, or wait (read the row, backing off)
 * ```
 *
 * **Transactional form.** Given `transaction` (`sqliteTransaction(store)`,
 * `libsqlTransaction(store)`, `pgTransaction(store)`, `mysqlTransaction(store)`) instead of
 * `store`, `fn` receives the drizzle transaction as its first argument, and its writes commit
 * together with the stored result, or not at all: a throw rolls them back and releases the
 * key; a process that dies commits nothing. The claim of the key stays its own short commit
 * before, so duplicates see the call in progress instead of waiting on a lock. A transaction the
 * database rolls back on its own (a serialization failure, a deadlock) runs again in place, up to
 * the runner's attempts; after the last one the key is released and the call rejects with
 * `TransactionRolledBackError`, which may be called again.
 *
 * @param fn - the function to protect
 * @param options - the store, the key and the rest of {@link MakeIdempotentOptions}
 * @returns a function with `fn`'s arguments that returns a promise of its result
 * @example
 * ```ts
 * import { makeIdempotent } from 'drizzle-idempotency/function';
 * import { openSqliteStore } from 'drizzle-idempotency/sqlite';
 *
 * const store = openSqliteStore('./idempotency.db');
 * const sendReceipt = makeIdempotent(
 *   async (order: { id: string; email: string }) => ({ sent: order.email }),
 *   { store, key: (order) => `receipt:${order.id}` },
 * );
 * await sendReceipt({ id: 'o-1', email: 'a@example.com' }); // runs
 * await sendReceipt({ id: 'o-1', email: 'a@example.com' }); // replays { sent: 'a@example.com' }
 * ```
 * @throws {@link InvalidOptionError} for a bad option, when called. The wrapped function rejects
 * with {@link CallInProgressError}, {@link KeyReusedError}, {@link ResultExpiredError},
 * {@link ResultNotRecordedError}, {@link ResultNotStorableError}, what `fn` throws, or an
 * invalid-argument error for a key or payload that cannot be used (nothing runs then).
 */
export function makeIdempotent<A extends unknown[], R>(
  fn: (...args: A) => R | Promise<R>,
  options: MakeIdempotentOptions<A, Awaited<R>>,
): (...args: A) => Promise<Awaited<R>>;
/**
 * The transactional form: `fn(tx, ...args)` runs inside a transaction that also records its
 * result. See the other signature.
 *
 * @param fn - the function to protect; receives the transaction first
 * @param options - the transaction runner, the key and the rest of {@link TransactionalOptions}
 */
export function makeIdempotent<TX, A extends unknown[], R>(
  fn: (tx: TX, ...args: A) => R | Promise<R>,
  options: TransactionalOptions<TX, A, Awaited<R>>,
): (...args: A) => Promise<Awaited<R>>;
/**
 * The stepped form: `fn(step, ...args)` receives a step function whose steps are recorded under
 * the call's key, so a call taken over after a crash goes on from its last recorded step (see
 * docs/steps.md). The call's arguments are recorded with its first step, for `resumeAbandoned`.
 *
 * @param fn - the function to protect; receives the step function first
 * @param options - the step log, the key and the rest of {@link SteppedOptions}
 */
export function makeIdempotent<TX, A extends unknown[], R>(
  fn: (step: Step<TX>, ...args: A) => R | Promise<R>,
  options: SteppedOptions<TX, A, Awaited<R>>,
): (...args: A) => Promise<Awaited<R>>;
export function makeIdempotent<TX, A extends unknown[], R>(
  fn:
    | ((...args: A) => R | Promise<R>)
    | ((tx: TX, ...args: A) => R | Promise<R>)
    | ((step: Step<TX>, ...args: A) => R | Promise<R>),
  options: MakeIdempotentOptions<A, R> | TransactionalOptions<TX, A, R> | SteppedOptions<TX, A, R>,
): (...args: A) => Promise<R> {
  if (typeof fn !== 'function') {
    throw new TypeError('makeIdempotent needs a function to wrap');
  }
  if (typeof options === 'object' && options !== null && 'steps' in options) {
    const log = options.steps;
    if (typeof log?.write !== 'function' || typeof log.deriveKey !== 'function') {
      throw new InvalidOptionError(
        'steps must come from a step log: sqliteSteps, pgSteps, mysqlSteps, libsqlSteps, d1Steps, durableSqliteSteps or bunSqliteSteps',
      );
    }
    const settings = resolveFunctionOptions<A, R>({ ...options, store: log.store });
    return wrap(
      settings,
      plainExecute(settings, fn as (step: Step<TX>, ...args: A) => R | Promise<R>, log),
    );
  }
  if (typeof options === 'object' && options !== null && 'transaction' in options) {
    const runner = options.transaction;
    if (typeof runner?.run !== 'function') {
      throw new InvalidOptionError(
        'transaction must come from sqliteTransaction, libsqlTransaction, pgTransaction or mysqlTransaction',
      );
    }
    const settings = resolveFunctionOptions<A, R>({ ...options, store: runner?.store });
    return wrap(
      settings,
      transactionalExecute(settings, runner, fn as (tx: TX, ...args: A) => R | Promise<R>),
    );
  }
  const settings = resolveFunctionOptions(options as MakeIdempotentOptions<A, R>);
  return wrap(settings, plainExecute(settings, fn as (...args: A) => R | Promise<R>));
}
