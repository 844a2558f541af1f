import { InvalidOptionError } from './errors.js';
import { assertLeaseSeconds, assertSecondsClock } from './validation.js';
import { resolveWait } from './wait.js';

/** The default retention of an answer or result: 24 hours, Stripe's minimum. */
export const DEFAULT_TTL_SECONDS = 24 * 3600;

/**
 * The default lease of a key's owner: 30 s. Long enough that renewing it every 10 s keeps a live
 * owner's key through a stalled event loop, a garbage collection or a slow database; short enough
 * that the key of a process that crashed or was killed is taken over by a retry within half a
 * minute, not at the end of its retention. Raise it if your work can freeze for longer (a long GC
 * pause, a suspended VM); lower it if clients retry fast and the work is cheap.
 */
export const DEFAULT_LEASE_SECONDS = 30;

/** The options the HTTP layer and `makeIdempotent` share, as their users give them. */
export interface ClaimOptions {
  readonly ttlSeconds?: number;
  readonly leaseSeconds?: number;
  readonly now?: () => number;
  readonly wait?: { readonly timeoutMs: number; readonly intervalMs?: number };
  readonly afterExpiry?: AfterExpiry;
}

/**
 * What a key whose stored answer is past its retention (`expires <= now`) but not yet swept is:
 * - `'refuse'` (the default): neither replayed nor run (409 `answer-expired`,
 *   `ResultExpiredError`) until a sweep deletes it, the expiry policy the IETF
 *   Idempotency-Key draft asks for: an expired key is not silently reused;
 * - `'new-request'`: a new request at once: the claim replaces the expired row in one fenced
 *   statement, so of concurrent claims one wins and a sweep racing it
 *   either deletes the row first (the claim then inserts) or finds it pending and leaves it.
 */
export type AfterExpiry = 'refuse' | 'new-request';

/** {@link ClaimOptions} with the defaults applied and checked: what the claim engine runs on. */
export interface ClaimSettings {
  /** How long an answer is replayed, in seconds. */
  readonly ttlSeconds: number;
  /** The lease of an owner, in seconds. */
  readonly leaseSeconds: number;
  /** The clock, in seconds. */
  readonly now: () => number;
  /** How long a duplicate waits for the owner, in milliseconds; 0 answers at once. */
  readonly waitTimeoutMs: number;
  /** The first pause between two looks of a waiting duplicate, in milliseconds. */
  readonly waitIntervalMs: number;
  /** Whether an expired, unswept answer is replaced by a new claim (`afterExpiry: 'new-request'`). */
  readonly replaceExpired: boolean;
}

/**
 * Applies the defaults to the shared options and checks them, so a misconfiguration fails when
 * the layer or the wrapper is made, not on the first request or call.
 *
 * @throws {@link InvalidOptionError} for an option of the wrong type or out of range
 */
export function resolveClaimOptions(options: ClaimOptions): ClaimSettings {
  const ttlSeconds = options.ttlSeconds ?? DEFAULT_TTL_SECONDS;
  if (typeof ttlSeconds !== 'number' || !Number.isFinite(ttlSeconds) || ttlSeconds <= 0) {
    throw new InvalidOptionError(
      `ttlSeconds must be a finite number greater than 0, got ${String(ttlSeconds)}`,
    );
  }
  const leaseSeconds = options.leaseSeconds ?? DEFAULT_LEASE_SECONDS;
  assertLeaseSeconds(leaseSeconds);
  const now = options.now ?? (() => Date.now() / 1000);
  if (typeof now !== 'function') throw new InvalidOptionError('now must be a function');
  assertSecondsClock(now);
  const wait = resolveWait(options.wait);
  const { afterExpiry = 'refuse' } = options;
  if (afterExpiry !== 'refuse' && afterExpiry !== 'new-request') {
    throw new InvalidOptionError(
      `afterExpiry must be 'refuse' or 'new-request', got ${JSON.stringify(afterExpiry)}`,
    );
  }
  return {
    replaceExpired: afterExpiry === 'new-request',
    ttlSeconds,
    leaseSeconds,
    now,
    waitTimeoutMs: wait.timeoutMs,
    waitIntervalMs: wait.intervalMs,
  };
}
