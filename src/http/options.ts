import {
  type AfterExpiry,
  type ClaimSettings,
  resolveClaimOptions,
} from '../core/claim-options.js';
import { InvalidOptionError } from '../core/errors.js';
import { type IgnoredMembers, readIgnoredMembers } from '../core/json-pointer.js';
import type { Fingerprint } from '../core/member-digests.js';
import type { StepLog } from '../core/steps.js';
import { assertIntegerOption, assertSecondsOption, MAX_LEASE_SECONDS } from '../core/validation.js';
import { keptRequestFingerprint } from './fingerprint.js';
import type { OutcomeEvent } from './outcome.js';
import type { IdempotentRequest } from './request.js';
import { DEFAULT_STORED_HEADERS } from './response.js';

export { DEFAULT_LEASE_SECONDS, DEFAULT_TTL_SECONDS } from '../core/claim-options.js';

/** The default largest answer body kept for replay: 1 MiB. */
export const DEFAULT_MAX_STORED_BYTES = 1024 * 1024;

// How many leases a stream may stay open, by default, before its key is recorded without it: five
// minutes with the default lease, long enough for a download or a model's answer streamed whole,
// short enough that a subscription that never ends gets a record within minutes.
const STREAM_RECORD_AFTER_LEASES = 10;

/** How the default request fingerprint is shaped: see `fingerprint` in {@link IdempotentOptions}. */
export interface FingerprintOptions {
  /**
   * JSON pointers (RFC 6901) to members left out of a JSON body before it is digested: members
   * that change between retries of one request (`/sentAt`, `/meta/traceId`, `/items/0/nonce`).
   * A pointer to a member the body lacks changes nothing; a body that is not JSON is digested as
   * its bytes, whatever the list says. At most 64 pointers, each at most 32 members deep.
   */
  readonly ignore?: readonly string[];
}

/** Options of {@link idempotent} and of the framework adapters. */
export interface IdempotentOptions {
  /**
   * How long an answer is replayed, in seconds: a key is reserved with
   * `expires = now + ttlSeconds`. Default 24 h. Choose it to outlast every client's retries; once
   * an answer is purged its key is a new request.
   */
  readonly ttlSeconds?: number;
  /**
   * The clock, in **seconds** (not milliseconds); the same clock your sweep uses for `now`.
   * Default: the wall clock, `Date.now() / 1000`. It is called once when the layer is built: a
   * value that is not a finite number of seconds from 0 to 10^11 (milliseconds look like 1.7 ×
   * 10^12) is refused with an `InvalidOptionError` there, not on the first request.
   */
  readonly now?: () => number;
  /**
   * The lease of a request in flight, in seconds (default 30, see {@link DEFAULT_LEASE_SECONDS}).
   * The layer renews it every third of it while the handler runs, so only a
   * dead or frozen owner lapses; the next retry with the same body then takes the key over and runs
   * the handler once more. A 409 for a request in progress carries a `Retry-After` of the lease
   * left. At most 7 days (`MAX_LEASE_SECONDS`); a longer one is refused with an
   * `InvalidOptionError`.
   */
  readonly leaseSeconds?: number;
  /** Whether a request without `Idempotency-Key` gets 400 (default) or runs without the layer. */
  readonly required?: boolean;
  /** The methods the layer applies to; others pass through untouched. Default `POST`, `PATCH`. */
  readonly methods?: readonly string[];
  /**
   * The request fingerprint: what must match for a request to count as a retry. Default: the
   * method, the path and the body (`requestFingerprint`), with the digests of the body's
   * top-level members kept beside it, so a key reused with another body answers 422 naming the
   * members that differ. `{ ignore: ['/meta/traceId'] }` leaves volatile members out of the body
   * first (see {@link FingerprintOptions}); a function of your own replaces the fingerprint (its
   * 422 then names no members). An `ignore` list that is not one of JSON pointers is refused with
   * an `InvalidOptionError` naming the pointer when the layer is built.
   */
  readonly fingerprint?:
    | ((request: IdempotentRequest) => string | Promise<string>)
    | FingerprintOptions;
  /**
   * Whether an answer with this status is stored and replayed. Default: every status below 500.
   * An answer that is not stored releases the key, so a retry runs again.
   */
  readonly shouldStore?: (status: number) => boolean;
  /**
   * Response headers stored and replayed with the answer (case-insensitive). `Content-Type` and
   * `Content-Encoding` are always kept: they describe the stored bytes.
   */
  readonly storedHeaders?: readonly string[];
  /**
   * An estimate of how long the handler takes, in whole seconds: the `Retry-After` of a 409 for a
   * request in progress. With a lease the 409 carries the smaller of this estimate and the lease
   * left (a retry sooner than the estimate would most likely meet the same 409; one after the
   * lease lapses may take the key over); without one (a row marked unrecorded) it carries the
   * estimate. Default: none, so the 409 carries the lease left, which is
   * 20–30 s with the default 30 s lease however fast the handler is, or 1 s without a lease. Set it
   * to your handler's usual duration (say 2 for a 1.5 s payment call) so clients retry when the
   * answer is likely there.
   */
  readonly retryAfterSeconds?: number;
  /**
   * Instead of answering 409 at once, wait up to `timeoutMs` (at most 10 minutes) for the first
   * request to finish, then replay its answer. Default: no waiting. The waiting request only reads
   * the key's row: first after `intervalMs` (default 50, at least 10, `MIN_WAIT_INTERVAL_MS`), then
   * after pauses that double, with jitter, up to 1 s. It claims the key only once the row is gone
   * (the first request failed) or its lease lapsed.
   */
  readonly wait?: { readonly timeoutMs: number; readonly intervalMs?: number };
  /**
   * A key whose stored answer is past `ttlSeconds` but not yet swept: `'refuse'` (the default, the
   * expiry policy the IETF Idempotency-Key draft asks for) answers 409 `answer-expired` until the
   * next sweep deletes the row, after which the key is new; `'new-request'` runs it as a new
   * request at once, the claim replacing the expired row in one fenced statement (one winner among
   * concurrent requests, safe against a sweep).
   */
  readonly afterExpiry?: AfterExpiry;
  /**
   * The largest answer body kept for replay, in bytes. Default 1 MiB; `Infinity` keeps every
   * answer. A bigger answer is still sent to the client in full, and its key is completed with only
   * the body's size: a retry gets 410 `answer-not-kept` (the handler does not run again). A
   * streamed answer is kept while it fits too: the moment it grows past it, its key is recorded as
   * done with only the size sent so far (a retry gets 410 at once, even while the stream goes on),
   * and the rest is sent as it comes, not buffered.
   */
  readonly maxStoredBytes?: number;
  /**
   * Whether a streamed answer (chunked writes, SSE, a `StreamableFile`, a stream sent with
   * `reply.send`, a `Response` whose body is still coming) is kept for replay while it fits
   * `maxStoredBytes`. Default `true`. With `false`, no stream is buffered: it is sent as it comes,
   * its key is recorded as done without it at its first byte, and a retry gets 410
   * `answer-not-kept`, even while the stream goes on.
   */
  readonly storeStreams?: boolean;
  /**
   * How long a streamed answer may stay open and still be kept, in seconds, counted from when its
   * status and headers go out. A stream still open then (a subscription, server-sent events that
   * never end) has its key recorded as done with only the size sent so far, at once: its lease is
   * no longer renewed, the rest of the stream is sent as it comes without being buffered, and a
   * retry gets 410 `answer-not-kept` (never 409, never a second run). Only a stream that ends
   * within it and fits `maxStoredBytes` is replayed. A status that is not stored (5xx by default)
   * is never recorded: its key is released when its stream ends, however long that takes.
   * Default: ten leases (300 with the default `leaseSeconds` of 30), at most
   * {@link MAX_LEASE_SECONDS}. A value that is not a number above 0 and at most that is refused
   * with an `InvalidOptionError` when the layer is built.
   */
  readonly streamRecordAfterSeconds?: number;
  /**
   * Told what happened to each request (see {@link OutcomeEvent}): for logs, metrics and traces.
   * It runs before the answer is sent; an error it throws is ignored and never changes the answer.
   */
  readonly onOutcome?: (event: OutcomeEvent) => void;
  /**
   * Records the handler's steps under the request's key (`sqliteSteps(store, { secret })`,
   * `pgSteps`, `mysqlSteps`, over the layer's store): the handler gets its step function with
   * `idempotencyStep(request)`, so a retry that takes the key over after a crash goes on from the
   * last recorded step instead of running every step again (see docs/steps.md). A handler that
   * fails after recording a step (a throw, a status that is not stored, a closed response) ends
   * its lease instead of releasing the key, so the steps are kept for the next request.
   */
  readonly steps?: StepLog<unknown>;
}

/** {@link IdempotentOptions} with every default applied and checked. */
export interface ResolvedOptions extends ClaimSettings {
  readonly required: boolean;
  readonly methods: ReadonlySet<string>;
  readonly fingerprint: (request: IdempotentRequest) => Fingerprint | Promise<Fingerprint>;
  readonly shouldStore: (status: number) => boolean;
  readonly storedHeaders: ReadonlySet<string>;
  readonly retryAfterSeconds: number | undefined;
  readonly maxStoredBytes: number;
  readonly storeStreams: boolean;
  /** How long a stream may stay open and still be kept, in milliseconds. */
  readonly streamRecordAfterMs: number;
  readonly onOutcome: ((event: OutcomeEvent) => void) | undefined;
  readonly steps: StepLog<unknown> | undefined;
}

function assertFunction(value: unknown, name: string): void {
  if (typeof value !== 'function') throw new InvalidOptionError(`${name} must be a function`);
}

function assertStrings(value: unknown, name: string): asserts value is readonly string[] {
  if (!Array.isArray(value) || !value.every((item) => typeof item === 'string' && item !== '')) {
    throw new InvalidOptionError(`${name} must be an array of non-empty strings`);
  }
}

// The fingerprint option as the layer calls it: a function of yours as it is, or the default
// shaped by its `ignore` list.
function resolveFingerprint(
  option: IdempotentOptions['fingerprint'],
): ResolvedOptions['fingerprint'] {
  if (typeof option === 'function') return option;
  if (option !== undefined && (typeof option !== 'object' || option === null)) {
    throw new InvalidOptionError('fingerprint must be a function or { ignore: [JSON pointers] }');
  }
  const ignore = option?.ignore;
  const ignored: IgnoredMembers | undefined =
    ignore === undefined ? undefined : readIgnoredMembers(ignore, 'fingerprint.ignore');
  return (request) => keptRequestFingerprint(request, ignored);
}

/**
 * Applies the defaults and checks every option, so a misconfiguration fails when the middleware
 * is built, not on the first request.
 *
 * @throws {@link InvalidOptionError} for an option of the wrong type or out of range
 */
export function resolveOptions(options: IdempotentOptions): ResolvedOptions {
  const claim = resolveClaimOptions(options);
  const fingerprint = resolveFingerprint(options.fingerprint);
  const shouldStore = options.shouldStore ?? ((status: number) => status < 500);
  assertFunction(shouldStore, 'shouldStore');
  const methods = options.methods ?? ['POST', 'PATCH'];
  assertStrings(methods, 'methods');
  const storedHeaders = options.storedHeaders ?? DEFAULT_STORED_HEADERS;
  assertStrings(storedHeaders, 'storedHeaders');
  const { retryAfterSeconds } = options;
  if (retryAfterSeconds !== undefined) {
    assertIntegerOption(retryAfterSeconds, 'retryAfterSeconds', 0, 86_400);
  }
  const maxStoredBytes = options.maxStoredBytes ?? DEFAULT_MAX_STORED_BYTES;
  if (
    maxStoredBytes !== Number.POSITIVE_INFINITY &&
    (!Number.isSafeInteger(maxStoredBytes) || maxStoredBytes < 0)
  ) {
    throw new InvalidOptionError(
      `maxStoredBytes must be an integer from 0 up, or Infinity, got ${String(maxStoredBytes)}`,
    );
  }
  if (options.onOutcome !== undefined) assertFunction(options.onOutcome, 'onOutcome');
  const { steps } = options;
  if (
    steps !== undefined &&
    (typeof steps?.write !== 'function' || typeof steps.deriveKey !== 'function')
  ) {
    throw new InvalidOptionError('steps must come from sqliteSteps, pgSteps or mysqlSteps');
  }
  const required = options.required ?? true;
  if (typeof required !== 'boolean') throw new InvalidOptionError('required must be a boolean');
  const storeStreams = options.storeStreams ?? true;
  if (typeof storeStreams !== 'boolean') {
    throw new InvalidOptionError('storeStreams must be a boolean');
  }
  const streamRecordAfterSeconds =
    options.streamRecordAfterSeconds ??
    Math.min(STREAM_RECORD_AFTER_LEASES * claim.leaseSeconds, MAX_LEASE_SECONDS);
  assertSecondsOption('streamRecordAfterSeconds', streamRecordAfterSeconds);
  return {
    ...claim,
    required,
    methods: new Set(methods.map((method) => method.toUpperCase())),
    fingerprint,
    shouldStore,
    storedHeaders: new Set(storedHeaders.map((name) => name.toLowerCase())),
    retryAfterSeconds,
    maxStoredBytes,
    storeStreams,
    streamRecordAfterMs: streamRecordAfterSeconds * 1000,
    onOutcome: options.onOutcome,
    steps,
  };
}
