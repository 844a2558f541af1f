import { setTimeout as sleep } from 'node:timers/promises';
import type { JsonValue } from '../core/json.js';
import { KeyStatus } from '../core/status.js';
import type { IdempotencyRecord } from '../core/store.js';
import { assertKey } from '../core/validation.js';
import {
  CallInProgressError,
  PayloadMismatchError,
  ResultExpiredError,
  ResultNotRecordedError,
} from './errors.js';
import {
  type MakeIdempotentOptions,
  type ResolvedFunctionOptions,
  resolveFunctionOptions,
} from './options.js';

// How often a key that vanished between `reserve` and `get` (released or purged in between) is
// claimed again before it counts as in progress: it keeps changing hands, so others own it.
const MAX_VANISHED = 3;

/** What the store holds for a key when a call comes in. */
type Claim =
  | { readonly status: 'acquired' }
  | { readonly status: 'done'; readonly record: IdempotencyRecord<unknown> }
  | { readonly status: 'mismatch'; readonly record: IdempotencyRecord<unknown> }
  | { readonly status: 'inProgress'; readonly record: IdempotencyRecord<unknown> | null };

async function claim<A extends unknown[], R>(
  settings: ResolvedFunctionOptions<A, R>,
  key: string,
  digest: string,
  now: number,
): Promise<Claim> {
  const { store } = settings;
  for (let vanished = 0; vanished < MAX_VANISHED; vanished++) {
    if (await store.reserve(key, digest, now + settings.ttlSeconds)) return { status: 'acquired' };
    const record = await store.get(key);
    if (record === null) continue;
    if (record.fingerprint !== digest) return { status: 'mismatch', record };
    if (record.status === KeyStatus.done) return { status: 'done', record };
    return { status: 'inProgress', record };
  }
  return { status: 'inProgress', record: null };
}

async function execute<A extends unknown[], R>(
  settings: ResolvedFunctionOptions<A, R>,
  fn: (...args: A) => R | Promise<R>,
  args: A,
  key: string,
  digest: string,
): Promise<Awaited<R>> {
  const { store } = settings;
  let result: Awaited<R>;
  try {
    result = await fn(...args);
  } catch (error) {
    // The function failed, so its effect did not complete: the key is released (only the pending
    // row with this fingerprint) and a retry runs it again.
    try {
      await store.release(key, digest);
    } catch (releaseError) {
      throw new AggregateError(
        [error, releaseError],
        'the function failed and releasing its idempotency key failed too',
      );
    }
    throw error;
  }
  // From here the effect happened. A result that cannot be recorded keeps the key pending:
  // releasing it would let a retry run the effect a second time.
  let finished: boolean;
  try {
    finished = await store.finish(key, digest, settings.codec.serialize(result));
  } catch (error) {
    const reason = error instanceof Error ? error.message : String(error);
    throw new ResultNotRecordedError(key, result, reason, error);
  }
  if (!finished) {
    throw new ResultNotRecordedError(
      key,
      result,
      'no pending row of this call was left to finish: it was released while the function ran',
    );
  }
  return result;
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
 *     └─ running elsewhere ──────▶ CallInProgressError, or wait (poll) and look again
 * ```
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
): (...args: A) => Promise<Awaited<R>> {
  if (typeof fn !== 'function') {
    throw new TypeError('makeIdempotent needs a function to wrap');
  }
  const settings = resolveFunctionOptions(options);
  return async (...args: A): Promise<Awaited<R>> => {
    const key = settings.key(...args);
    assertKey(key);
    const digest = settings.fingerprint(...args);
    const deadline = performance.now() + settings.waitTimeoutMs;
    for (;;) {
      const now = settings.now();
      const found = await claim(settings, key, digest, now);
      switch (found.status) {
        case 'acquired':
          return execute(settings, fn, args, key, digest);
        case 'mismatch':
          throw new PayloadMismatchError(key, found.record);
        case 'done':
          if (found.record.expires <= now) throw new ResultExpiredError(key, found.record);
          return settings.codec.deserialize(found.record.response as JsonValue);
        case 'inProgress':
          if (performance.now() + settings.waitIntervalMs > deadline) {
            throw new CallInProgressError(key, found.record);
          }
          await sleep(settings.waitIntervalMs);
      }
    }
  };
}
