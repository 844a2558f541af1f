import { InvalidOptionError } from './errors.js';
import { type KeyRow, readBoolean, readNumber, toRecord } from './record.js';
import { KeyStatus } from './status.js';
import type { AcquireOptions, AcquireResult, LeaseState, PendingKey } from './store.js';
import { assertIntegerOption, assertLimit, assertTime } from './validation.js';

/** The most rows one `pendingKeys` call lists. */
export const MAX_PENDING_LIMIT = 10_000;
/** How many rows `pendingKeys` lists when no limit is given. */
export const DEFAULT_PENDING_LIMIT = 100;

/**
 * Checks the options of `acquire` and returns the lease deadline `now + leaseSeconds`.
 *
 * @throws {@link InvalidTimeError} for a non-finite `expires` or `now`
 * @throws {@link InvalidOptionError} for a `leaseSeconds` that is not a finite number above 0
 */
export function leaseDeadline(options: AcquireOptions): number {
  if (typeof options !== 'object' || options === null) {
    throw new InvalidOptionError('acquire takes { expires, now, leaseSeconds }');
  }
  assertTime(options.expires, 'expires');
  assertTime(options.now, 'now');
  const { leaseSeconds } = options;
  if (typeof leaseSeconds !== 'number' || !Number.isFinite(leaseSeconds) || leaseSeconds <= 0) {
    throw new InvalidOptionError(
      `leaseSeconds must be a finite number greater than 0, got ${String(leaseSeconds)}`,
    );
  }
  const until = options.now + leaseSeconds;
  assertTime(until, 'now + leaseSeconds');
  return until;
}

/**
 * Asserts that a fencing token is what `acquire` hands out: a safe integer from 1 up.
 *
 * @throws {@link InvalidOptionError} otherwise
 */
export function assertFencingToken(token: unknown): asserts token is number {
  assertIntegerOption(token, 'fencingToken', 1, Number.MAX_SAFE_INTEGER);
}

// Node runs a timer asked for more than 2^31 - 1 ms after 1 ms instead, so a lease too long for
// the timer would be renewed a thousand times a second.
const MAX_TIMER_MS = 2 ** 31 - 1;

/**
 * How often a lease of `leaseSeconds` is renewed, in milliseconds: every third of it, so it
 * outlasts two missed renewals; never more than a Node timer can wait (about 24.8 days).
 */
export function renewalIntervalMs(leaseSeconds: number): number {
  return Math.min((leaseSeconds * 1000) / 3, MAX_TIMER_MS);
}

/**
 * Checks `pendingKeys`' limit and returns it, 100 when not given.
 *
 * @throws {@link InvalidLimitError} for a limit that is not an integer from 1 to
 * {@link MAX_PENDING_LIMIT}
 */
export function pendingLimit(limit: unknown): number {
  const value = limit ?? DEFAULT_PENDING_LIMIT;
  assertLimit(value, MAX_PENDING_LIMIT);
  return value;
}

/**
 * Checks `pendingKeys`' prefix and returns it, `''` (every key) when not given.
 *
 * @throws {@link InvalidOptionError} for a prefix that is not a well-formed string without NUL
 */
export function pendingPrefix(options: { readonly prefix?: unknown }): string {
  const prefix = options.prefix ?? '';
  if (typeof prefix !== 'string' || !prefix.isWellFormed() || prefix.includes('\0')) {
    throw new InvalidOptionError('prefix must be a well-formed string without NUL characters');
  }
  return prefix;
}

/** The lease state of a pending row at `now` (see {@link LeaseState}). */
function leaseState(row: KeyRow, now: number): LeaseState {
  if (readBoolean(row.unrecorded)) return 'unrecorded';
  const until = readNumber(row.lease_until);
  if (until === null) return 'unleased';
  return until <= now ? 'lapsed' : 'live';
}

/** A pending row as `pendingKeys` lists it. */
export function toPendingKey(row: KeyRow, now: number): PendingKey {
  return {
    key: row.id,
    fingerprint: row.fingerprint,
    expires: row.expires,
    leaseUntil: readNumber(row.lease_until),
    fencingToken: readNumber(row.attempt) ?? 1,
    state: leaseState(row, now),
  };
}

/**
 * What `acquire` reports when it could neither insert nor take over: the existing row, judged
 * for a caller with `fingerprint`.
 */
export function existingOutcome<T>(row: KeyRow, fingerprint: string): AcquireResult<T> {
  const record = toRecord<T>(row);
  if (record.fingerprint !== fingerprint) return { status: 'mismatch', record };
  if (record.status === KeyStatus.done) return { status: 'done', record };
  return {
    status: 'inProgress',
    fencingToken: record.fencingToken,
    leaseUntil: record.leaseUntil,
    unrecorded: record.unrecorded,
  };
}

/**
 * What `acquire` reports from a read alone, or `undefined` when only its write can decide (the
 * key is missing, or its row is pending under `fingerprint` with a lease that lapsed by `now`). A
 * replay, another payload's key and a live lease are settled by reading: the retry of a finished
 * request neither writes nor locks the row (no WAL, no wait for a synchronous standby). Whatever
 * the read leaves open, the one-statement write still decides, so racing contenders stay safe.
 */
export function readOutcome<T>(
  row: KeyRow | undefined,
  fingerprint: string,
  now: number,
): AcquireResult<T> | undefined {
  if (row === undefined) return undefined;
  const outcome = existingOutcome<T>(row, fingerprint);
  if (outcome.status !== 'inProgress') return outcome;
  const lapsed = !outcome.unrecorded && outcome.leaseUntil !== null && outcome.leaseUntil <= now;
  return lapsed ? undefined : outcome;
}

/**
 * What `acquire` reports for the row it inserted or took over, from the fencing token its
 * statement returned and the fresh token it inserted: a takeover always returns another token
 * (see `takeoverToken`), so the two are equal only for a key inserted afresh.
 */
export function acquiredOutcome<T>(
  returned: number | string,
  fresh: number,
  leaseUntil: number,
): Extract<AcquireResult<T>, { status: 'acquired' }> {
  const token = Number(returned);
  return { status: 'acquired', fencingToken: token, leaseUntil, takenOver: token !== fresh };
}
