import {
  type AfterExpiry,
  type ClaimSettings,
  DEFAULT_LEASE_SECONDS,
  DEFAULT_TTL_SECONDS,
  resolveClaimOptions,
} from '../core/claim-options.js';
import { InvalidOptionError } from '../core/errors.js';
import type { JsonValue } from '../core/json.js';
import { readIgnoredMembers } from '../core/json-pointer.js';
import type { Fingerprint } from '../core/member-digests.js';
import { decodeResult, encodeResult } from '../core/result-encoding.js';
import type { StepLog } from '../core/steps.js';
import type { LeasedIdempotencyStore } from '../core/store.js';
import type { TransactionRunner } from '../core/transaction-runner.js';
import { keptPayloadFingerprint } from './fingerprint.js';

/** The default retention of a result: 24 hours (the claim engine's default). */
export const DEFAULT_FUNCTION_TTL_SECONDS = DEFAULT_TTL_SECONDS;

/**
 * The default lease of a running call: 30 seconds (the claim engine's default, see
 * `DEFAULT_LEASE_SECONDS`), renewed every third of it while the function runs.
 */
export const DEFAULT_FUNCTION_LEASE_SECONDS = DEFAULT_LEASE_SECONDS;

/** How a result is turned into the stored JSON and back. */
export interface ResultCodec<R> {
  /** The JSON value stored for `result`. Anything JSON cannot represent exactly is refused. */
  serialize(result: R): JsonValue;
  /** The result replayed from the stored JSON value. */
  deserialize(stored: JsonValue): R;
}

/** Options of {@link makeIdempotent}. `A` are the function's arguments, `R` its result. */
export interface MakeIdempotentOptions<A extends unknown[], R> {
  /** Where keys and results are kept: any {@link LeasedIdempotencyStore}, as every store of this package is. */
  readonly store: LeasedIdempotencyStore<unknown>;
  /**
   * The idempotency key of a call, from its arguments (a message id, an event id, a job name and
   * date). Calls with the same key run once. Prefix it if the store is shared with other code.
   */
  readonly key: (...args: A) => string;
  /**
   * The part of the arguments that must match for a call to count as a repeat, fingerprinted as
   * canonical JSON. Default: all the arguments. A repeat with another payload throws
   * {@link KeyReusedError}. Leave out what legitimately varies between deliveries
   * (a redelivery counter, a trace id).
   */
  readonly payload?: (...args: A) => unknown;
  /**
   * How the payload is fingerprinted: `ignore` lists JSON pointers (RFC 6901) to members left out
   * of it first (`/meta/traceId`; with the default payload, the arguments array, `/0/sentAt`).
   * At most 64 pointers, each at most 32 members deep; a pointer to a member the payload lacks
   * changes nothing. A list that is not one of JSON pointers is refused with an
   * `InvalidOptionError` naming the pointer when the wrapper is made. When the payload is an
   * object, a reuse of its key with another payload throws {@link KeyReusedError} naming the
   * top-level members that differ.
   */
  readonly fingerprint?: { readonly ignore?: readonly string[] };
  /** How long a result is replayed, in seconds. Default 24 h; choose it to outlast every retry. */
  readonly ttlSeconds?: number;
  /**
   * How long a running call owns its key without renewing it, in seconds; renewed every third of
   * it while the function runs, so only a dead or frozen call loses it. Default 30, at most 7 days
   * (`MAX_LEASE_SECONDS`).
   */
  readonly leaseSeconds?: number;
  /**
   * The clock, in **seconds** (not milliseconds): the same clock your retention sweep uses.
   * Default: the wall clock, `Date.now() / 1000`. It is called once when the wrapper is made: a
   * value that is not a finite number of seconds from 0 to 10^11 (`Date.now` gives 1.7 × 10^12)
   * is refused with an `InvalidOptionError` there.
   */
  readonly now?: () => number;
  /**
   * How results are stored and replayed. Default: every result that can be given back exactly:
   * JSON data, `undefined`, a `Date`, `-0`, `NaN`, `±Infinity` and a BigInt, anywhere in it; an
   * object member that is `undefined` is left out, as `JSON.stringify` leaves it out. A result
   * with anything else in it (a `Map`, a `Set`, a class instance, a function) is not stored: the
   * key is recorded done with that outcome and every call with it rejects with
   * {@link ResultNotStorableError}, without running the function again. A custom codec's
   * `serialize` that returns what JSON cannot hold is treated the same way.
   */
  readonly result?: ResultCodec<R>;
  /**
   * What a call does while another call with the same key runs: throw {@link CallInProgressError}
   * at once (the default), or wait up to `timeoutMs` (at most 10 minutes) and then return the
   * other call's result (or run, if that call failed and released the key, or its lease lapsed).
   * The waiting call only reads the key's row: first after `intervalMs` (default 50, at least 10,
   * `MIN_WAIT_INTERVAL_MS`), then after pauses that double, with jitter, up to 1 s.
   */
  readonly wait?: { readonly timeoutMs: number; readonly intervalMs?: number };
  /**
   * A key whose stored answer is past `ttlSeconds` but not yet swept: `'refuse'` (the default, the
   * expiry policy the IETF Idempotency-Key draft asks for) throws `ResultExpiredError` until the
   * next sweep deletes the row, after which the key is new; `'new-request'` runs the call as a new
   * one at once, the claim replacing the expired row in one fenced statement (one winner among
   * concurrent calls, safe against a sweep).
   */
  readonly afterExpiry?: AfterExpiry;
}

/**
 * Options of the transactional form of {@link makeIdempotent}: those of
 * {@link MakeIdempotentOptions}, with the store given by the transaction runner.
 */
export interface TransactionalOptions<TX, A extends unknown[], R>
  extends Omit<MakeIdempotentOptions<A, R>, 'store'> {
  /**
   * Runs the function's writes and the recording of its result in one transaction:
   * `sqliteTransaction(store)` or `pgTransaction(store)`.
   */
  readonly transaction: TransactionRunner<TX>;
}

/**
 * Options of the stepped form of {@link makeIdempotent}: those of {@link MakeIdempotentOptions},
 * with the store given by the step log. The function receives a step function first.
 */
export interface SteppedOptions<TX, A extends unknown[], R>
  extends Omit<MakeIdempotentOptions<A, R>, 'store'> {
  /**
   * Records the function's steps under its key: the step log of the store's dialect or runtime
   * (`sqliteSteps(store, { secret })`, `pgSteps`, `mysqlSteps`, `libsqlSteps`, `d1Steps`,
   * `durableSqliteSteps`, `bunSqliteSteps`); see docs/steps.md.
   */
  readonly steps: StepLog<TX>;
}

/** {@link MakeIdempotentOptions} with every default applied and checked. */
export interface ResolvedFunctionOptions<A extends unknown[], R> extends ClaimSettings {
  readonly store: LeasedIdempotencyStore<unknown>;
  readonly key: (...args: A) => string;
  readonly fingerprint: (...args: A) => Fingerprint;
  readonly codec: ResultCodec<R>;
}

// The default codec stores every result it can give back exactly: plain JSON as it is, and
// `undefined`, a Date, -0, NaN, ±Infinity and a BigInt in a tagged form (see result-encoding.ts).
function defaultCodec<R>(): ResultCodec<R> {
  return {
    serialize: (result) => encodeResult(result),
    deserialize: (stored) => decodeResult(stored) as R,
  };
}

function assertFunction(value: unknown, name: string): void {
  if (typeof value !== 'function') throw new InvalidOptionError(`${name} must be a function`);
}

/**
 * Applies the defaults and checks every option, so a misconfiguration fails when the wrapper is
 * made, not on the first call.
 *
 * @throws {@link InvalidOptionError} for an option of the wrong type or out of range
 */
export function resolveFunctionOptions<A extends unknown[], R>(
  options: MakeIdempotentOptions<A, R>,
): ResolvedFunctionOptions<A, R> {
  if (typeof options !== 'object' || options === null) {
    throw new InvalidOptionError('options must be an object with at least store and key');
  }
  const store = options.store;
  if (typeof store !== 'object' || store === null || typeof store.acquire !== 'function') {
    throw new InvalidOptionError(
      'store must be a LeasedIdempotencyStore, as every store of this package is',
    );
  }
  assertFunction(options.key, 'key');
  const payload = options.payload ?? ((...args: A) => args);
  assertFunction(payload, 'payload');
  const shape = options.fingerprint;
  if (shape !== undefined && (typeof shape !== 'object' || shape === null)) {
    throw new InvalidOptionError('fingerprint must be { ignore: [JSON pointers] }');
  }
  const ignored =
    shape?.ignore === undefined
      ? undefined
      : readIgnoredMembers(shape.ignore, 'fingerprint.ignore');
  const claim = resolveClaimOptions(options);
  const codec = options.result ?? defaultCodec<R>();
  assertFunction(codec.serialize, 'result.serialize');
  assertFunction(codec.deserialize, 'result.deserialize');
  return {
    ...claim,
    store,
    key: options.key,
    fingerprint: (...args) => keptPayloadFingerprint(payload(...args), ignored),
    codec,
  };
}
