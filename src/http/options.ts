import { InvalidOptionError } from '../core/errors.js';
import { assertIntegerOption } from '../core/validation.js';
import { requestFingerprint } from './fingerprint.js';
import type { IdempotentRequest } from './request.js';
import { DEFAULT_STORED_HEADERS } from './response.js';

/** The default retention of an answer: 24 hours, Stripe's minimum. */
export const DEFAULT_TTL_SECONDS = 24 * 3600;

/** Options of {@link idempotent} and of the framework adapters. */
export interface IdempotentOptions {
  /**
   * How long an answer is replayed, in seconds: a key is reserved with `expires = now + ttlSeconds`.
   * Default 24 h. Choose it to outlast every client's retries; once an answer is purged its key is a
   * new request.
   */
  readonly ttlSeconds?: number;
  /** The clock, in seconds; the same clock your sweep uses for `now`. Default: the wall clock. */
  readonly now?: () => number;
  /** Whether a request without `Idempotency-Key` gets 400 (default) or runs without the layer. */
  readonly required?: boolean;
  /** The methods the layer applies to; others pass through untouched. Default `POST`, `PATCH`. */
  readonly methods?: readonly string[];
  /** The request fingerprint. Default {@link requestFingerprint}: method, path and body. */
  readonly fingerprint?: (request: IdempotentRequest) => string | Promise<string>;
  /**
   * Whether an answer with this status is stored and replayed. Default: every status below 500.
   * An answer that is not stored releases the key, so a retry runs again.
   */
  readonly shouldStore?: (status: number) => boolean;
  /** Response headers stored and replayed with the answer (case-insensitive). */
  readonly storedHeaders?: readonly string[];
  /** The `Retry-After` of a 409 for a request in progress, in whole seconds. Default 1. */
  readonly retryAfterSeconds?: number;
  /**
   * Instead of answering 409 at once, wait up to `timeoutMs` for the first request to finish,
   * looking again every `intervalMs` (default 50), then replay its answer. Default: no waiting.
   */
  readonly wait?: { readonly timeoutMs: number; readonly intervalMs?: number };
}

/** {@link IdempotentOptions} with every default applied and checked. */
export interface ResolvedOptions {
  readonly ttlSeconds: number;
  readonly now: () => number;
  readonly required: boolean;
  readonly methods: ReadonlySet<string>;
  readonly fingerprint: (request: IdempotentRequest) => string | Promise<string>;
  readonly shouldStore: (status: number) => boolean;
  readonly storedHeaders: ReadonlySet<string>;
  readonly retryAfterSeconds: number;
  readonly waitTimeoutMs: number;
  readonly waitIntervalMs: number;
}

const MAX_WAIT_MS = 10 * 60 * 1000;

function assertFunction(value: unknown, name: string): void {
  if (typeof value !== 'function') throw new InvalidOptionError(`${name} must be a function`);
}

function assertStrings(value: unknown, name: string): asserts value is readonly string[] {
  if (!Array.isArray(value) || !value.every((item) => typeof item === 'string' && item !== '')) {
    throw new InvalidOptionError(`${name} must be an array of non-empty strings`);
  }
}

/**
 * Applies the defaults and checks every option, so a misconfiguration fails when the middleware
 * is built, not on the first request.
 *
 * @throws {@link InvalidOptionError} for an option of the wrong type or out of range
 */
export function resolveOptions(options: IdempotentOptions): ResolvedOptions {
  const ttlSeconds = options.ttlSeconds ?? DEFAULT_TTL_SECONDS;
  if (typeof ttlSeconds !== 'number' || !Number.isFinite(ttlSeconds) || ttlSeconds <= 0) {
    throw new InvalidOptionError(
      `ttlSeconds must be a finite number greater than 0, got ${String(ttlSeconds)}`,
    );
  }
  const now = options.now ?? (() => Date.now() / 1000);
  assertFunction(now, 'now');
  const fingerprint = options.fingerprint ?? requestFingerprint;
  assertFunction(fingerprint, 'fingerprint');
  const shouldStore = options.shouldStore ?? ((status: number) => status < 500);
  assertFunction(shouldStore, 'shouldStore');
  const methods = options.methods ?? ['POST', 'PATCH'];
  assertStrings(methods, 'methods');
  const storedHeaders = options.storedHeaders ?? DEFAULT_STORED_HEADERS;
  assertStrings(storedHeaders, 'storedHeaders');
  const retryAfterSeconds = options.retryAfterSeconds ?? 1;
  assertIntegerOption(retryAfterSeconds, 'retryAfterSeconds', 0, 86_400);
  const waitTimeoutMs = options.wait?.timeoutMs ?? 0;
  assertIntegerOption(waitTimeoutMs, 'wait.timeoutMs', 0, MAX_WAIT_MS);
  const waitIntervalMs = options.wait?.intervalMs ?? 50;
  assertIntegerOption(waitIntervalMs, 'wait.intervalMs', 1, MAX_WAIT_MS);
  const required = options.required ?? true;
  if (typeof required !== 'boolean') throw new InvalidOptionError('required must be a boolean');
  return {
    ttlSeconds,
    now,
    required,
    methods: new Set(methods.map((method) => method.toUpperCase())),
    fingerprint,
    shouldStore,
    storedHeaders: new Set(storedHeaders.map((name) => name.toLowerCase())),
    retryAfterSeconds,
    waitTimeoutMs,
    waitIntervalMs,
  };
}
