import { InvalidOptionError } from '../core/errors.js';
import { type JsonValue, serializeResponse } from '../core/json.js';
import { KeyStatus } from '../core/status.js';
import type { IdempotencyRecord, LeasedIdempotencyStore } from '../core/store.js';
import { assertKey } from '../core/validation.js';
import { waitForOwner } from '../core/wait.js';
import {
  CallInProgressError,
  CallSupersededError,
  PayloadMismatchError,
  ResultExpiredError,
  ResultNotRecordedError,
} from './errors.js';
import { isLeased, startHeartbeat } from './lease.js';
import {
  type MakeIdempotentOptions,
  type ResolvedFunctionOptions,
  resolveFunctionOptions,
  type TransactionalOptions,
} from './options.js';
import type { KeyOwner, TransactionRunner } from './transaction.js';

// How often a key that vanished between `reserve` and `get` (released or purged in between) is
// claimed again before it counts as in progress: it keeps changing hands, so others own it.
const MAX_VANISHED = 3;

/** What the store holds for a key when a call comes in. */
type Claim =
  | { readonly status: 'acquired'; readonly owner: KeyOwner }
  | { readonly status: 'done'; readonly record: IdempotencyRecord<unknown> }
  | { readonly status: 'mismatch'; readonly record: IdempotencyRecord<unknown> }
  | {
      readonly status: 'inProgress';
      readonly record: IdempotencyRecord<unknown> | null;
      readonly leaseUntil: number | null;
      /** Marked unrecorded: it waits for an operator, so waiting for it here is pointless. */
      readonly unrecorded: boolean;
    };

/** Runs the work of a call that owns its key and returns its result. */
type Execute<A extends unknown[], R> = (owner: KeyOwner, args: A) => Promise<R>;

// On a store with leases: one atomic acquire, which also takes over a key whose owner's lease
// lapsed (same payload only), handing out a new fencing token.
async function acquire<A extends unknown[], R>(
  settings: ResolvedFunctionOptions<A, R>,
  store: LeasedIdempotencyStore<unknown>,
  key: string,
  digest: string,
  now: number,
): Promise<Claim> {
  const found = await store.acquire(key, digest, {
    expires: now + settings.ttlSeconds,
    now,
    leaseSeconds: settings.leaseSeconds,
  });
  switch (found.status) {
    case 'acquired':
      return { status: 'acquired', owner: { key, digest, attempt: found.attempt } };
    case 'inProgress':
      return {
        status: 'inProgress',
        record: null,
        leaseUntil: found.leaseUntil,
        unrecorded: found.unrecorded,
      };
    default:
      return found;
  }
}

// On a store without leases: reserve, and look at the row when it exists.
async function reserve<A extends unknown[], R>(
  settings: ResolvedFunctionOptions<A, R>,
  key: string,
  digest: string,
  now: number,
): Promise<Claim> {
  const { store } = settings;
  for (let vanished = 0; vanished < MAX_VANISHED; vanished++) {
    if (await store.reserve(key, digest, now + settings.ttlSeconds)) {
      return { status: 'acquired', owner: { key, digest } };
    }
    const record = await store.get(key);
    if (record === null) continue;
    if (record.fingerprint !== digest) return { status: 'mismatch', record };
    if (record.status === KeyStatus.done) return { status: 'done', record };
    return { status: 'inProgress', record, leaseUntil: null, unrecorded: false };
  }
  return { status: 'inProgress', record: null, leaseUntil: null, unrecorded: false };
}

function claim<A extends unknown[], R>(
  settings: ResolvedFunctionOptions<A, R>,
  key: string,
  digest: string,
  now: number,
): Promise<Claim> {
  const { store } = settings;
  return isLeased(store)
    ? acquire(settings, store, key, digest, now)
    : reserve(settings, key, digest, now);
}

// Runs `work` with the owner's lease renewed in the background, on a store with leases.
async function withHeartbeat<A extends unknown[], R, T>(
  settings: ResolvedFunctionOptions<A, R>,
  owner: KeyOwner,
  work: () => Promise<T>,
): Promise<T> {
  const { store } = settings;
  if (owner.attempt === undefined || !isLeased(store)) return work();
  const stop = startHeartbeat(
    store,
    { ...owner, attempt: owner.attempt },
    settings.leaseSeconds,
    settings.now,
  );
  try {
    return await work();
  } finally {
    stop();
  }
}

// The function failed, so its effect did not complete (or was rolled back): the key is released
// (only the pending row with this fingerprint) and a retry runs it again.
async function releaseAfter<A extends unknown[], R>(
  settings: ResolvedFunctionOptions<A, R>,
  owner: KeyOwner,
  error: unknown,
): Promise<never> {
  try {
    const { store } = settings;
    await (owner.attempt !== undefined && isLeased(store)
      ? store.release(owner.key, owner.digest, owner.attempt)
      : store.release(owner.key, owner.digest));
  } catch (releaseError) {
    throw new AggregateError(
      [error, releaseError],
      'the function failed and releasing its idempotency key failed too',
    );
  }
  throw error;
}

// The result of a call that ran could not be recorded. On a store with leases the key is marked
// unrecorded, so it is never taken over (which would run the effect again) until an operator
// releases it; without leases a pending key is never taken over anyway.
async function notRecorded<A extends unknown[], R>(
  settings: ResolvedFunctionOptions<A, R>,
  owner: KeyOwner,
  result: R,
  reason: string,
  cause?: unknown,
): Promise<never> {
  const { store } = settings;
  if (owner.attempt !== undefined && isLeased(store)) {
    try {
      await store.markUnrecorded(owner.key, owner.digest, owner.attempt);
    } catch (markError) {
      throw new ResultNotRecordedError(
        owner.key,
        result,
        `${reason}; marking the key unrecorded failed too, so it may be taken over once its lease lapses`,
        new AggregateError([cause, markError]),
      );
    }
  }
  throw new ResultNotRecordedError(owner.key, result, reason, cause);
}

function plainExecute<A extends unknown[], R>(
  settings: ResolvedFunctionOptions<A, R>,
  fn: (...args: A) => R | Promise<R>,
): Execute<A, R> {
  return async (owner, args) => {
    let result: R;
    try {
      result = await withHeartbeat(settings, owner, async () => fn(...args));
    } catch (error) {
      return releaseAfter(settings, owner, error);
    }
    // From here the effect happened. A result that cannot be recorded keeps the key pending:
    // releasing it would let a retry run the effect a second time.
    const { store } = settings;
    let finished: boolean;
    try {
      const stored = settings.codec.serialize(result);
      finished = await (owner.attempt !== undefined && isLeased(store)
        ? store.finish(owner.key, owner.digest, stored, owner.attempt)
        : store.finish(owner.key, owner.digest, stored));
    } catch (error) {
      const reason = error instanceof Error ? error.message : String(error);
      return notRecorded(settings, owner, result, reason, error);
    }
    if (!finished) {
      // The row is no longer this call's: taken over after its lease lapsed, or released by hand.
      // Its new owner records its own result; nothing here is ours to mark.
      throw new ResultNotRecordedError(
        owner.key,
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
  return async (owner, args) => {
    let outcome: Awaited<ReturnType<typeof runner.run<R>>>;
    try {
      outcome = await withHeartbeat(settings, owner, () =>
        runner.run(
          owner,
          (tx) => fn(tx, ...args),
          // Checked inside the transaction: a result that cannot be stored rolls the writes back.
          (result) => serializeResponse(settings.codec.serialize(result)),
        ),
      );
    } catch (error) {
      // Rolled back: nothing of the function's was committed, so a retry may run it.
      return releaseAfter(settings, owner, error);
    }
    if (!outcome.committed) throw new CallSupersededError(owner.key);
    return outcome.result;
  };
}

function wrap<A extends unknown[], R>(
  settings: ResolvedFunctionOptions<A, R>,
  execute: Execute<A, R>,
): (...args: A) => Promise<R> {
  return async (...args: A): Promise<R> => {
    const key = settings.key(...args);
    assertKey(key);
    const digest = settings.fingerprint(...args);
    const deadline = performance.now() + settings.waitTimeoutMs;
    let found = await claim(settings, key, digest, settings.now());
    for (;;) {
      switch (found.status) {
        case 'acquired':
          return execute(found.owner, args);
        case 'mismatch':
          throw new PayloadMismatchError(key, found.record);
        case 'done':
          if (found.record.expires <= settings.now()) {
            throw new ResultExpiredError(key, found.record);
          }
          return settings.codec.deserialize(found.record.response as JsonValue);
        case 'inProgress': {
          if (found.unrecorded) throw new CallInProgressError(key, found.record, found.leaseUntil);
          const waited = await waitForOwner({
            store: settings.store,
            key,
            digest,
            now: settings.now,
            deadline,
            intervalMs: settings.waitIntervalMs,
            seen: found.record,
          });
          if (waited.status === 'inProgress') {
            // The row as last seen, if the wait looked at it; else what the claim saw.
            const { record } = waited;
            if (record === null) throw new CallInProgressError(key, found.record, found.leaseUntil);
            throw new CallInProgressError(key, record, record.leaseUntil);
          }
          // Only a row that is gone or whose lease lapsed is claimed again: a write.
          found =
            waited.status === 'claim' ? await claim(settings, key, digest, settings.now()) : waited;
        }
      }
    }
  };
}

/**
 * Wraps an async function so that calls with the same key run it once within the retention
 * period: the first call runs it and stores its result, later calls with the same key and payload
 * return the stored result without running it. For queue consumers, webhooks and scheduled jobs.
 *
 * ```
 *  call ─ key(args), fingerprint(payload(args))
 *     ▼
 *  claim the key ── new ──▶ run fn ─┬─ returns ─▶ store the result ─▶ return it
 *     │                             │     store fails ─▶ key stays pending, ResultNotRecordedError
 *     │                             └─ throws ──▶ release the key, rethrow
 *     ├─ done, same payload ─────▶ return the stored result (fn does not run)
 *     ├─ done, past retention ───▶ ResultExpiredError
 *     ├─ other payload ──────────▶ PayloadMismatchError
 *     └─ running elsewhere ──────▶ CallInProgressError, or wait (read the row, backing off)
 * ```
 *
 * **Transactional form.** Given `transaction` (`sqliteTransaction(store)`,
 * `libsqlTransaction(store)`, `pgTransaction(store)`, `mysqlTransaction(store)`) instead of
 * `store`, `fn` receives the drizzle transaction as its first argument, and its writes commit
 * together with the stored result, or not at all: a throw rolls them back and releases the
 * key; a process that dies commits nothing. The claim of the key stays its own short commit
 * before, so duplicates see the call in progress instead of waiting on a lock.
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
 * with {@link CallInProgressError}, {@link PayloadMismatchError}, {@link ResultExpiredError},
 * {@link ResultNotRecordedError}, what `fn` throws, or an invalid-argument error for a key or
 * payload that cannot be used (nothing runs then).
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
export function makeIdempotent<TX, A extends unknown[], R>(
  fn: ((...args: A) => R | Promise<R>) | ((tx: TX, ...args: A) => R | Promise<R>),
  options: MakeIdempotentOptions<A, R> | TransactionalOptions<TX, A, R>,
): (...args: A) => Promise<R> {
  if (typeof fn !== 'function') {
    throw new TypeError('makeIdempotent needs a function to wrap');
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
