import {
  InvalidFingerprintError,
  InvalidKeyError,
  InvalidLimitError,
  InvalidOptionError,
  InvalidTimeError,
} from './errors.js';

/** The most rows one `expired` or `purge` call returns. */
export const MAX_LIMIT = 100;

/** The number of rows `expired` and `purge` return when no limit is given. */
export const DEFAULT_LIMIT = 10;

/** The largest batch one `sweepBatch` deletes. */
export const MAX_BATCH_SIZE = 10_000;

/**
 * The milliseconds a sweep batch aims to take on a SQLite file opened in this process, when neither
 * `batchSize` nor `batchMillis` is given (the stores' `sweepBatchMillis`). On SQLite a writer that
 * finds a batch holding the lock sleeps in the busy handler's steps (1, 2, 5, 10 … ms) before it
 * tries again: a batch that ends within the first steps costs it a few milliseconds, where one
 * twice as long costs it the next, longer step. How many rows fit in that time depends on the table
 * (each index a row is deleted from is one more page to write), the disk and the load, so the sweep
 * measures it instead of fixing a row count.
 */
export const DEFAULT_BATCH_MILLIS = 3;

/**
 * The most UTF-8 bytes of a key (a stored id: an HTTP key with its scope) or a fingerprint, on
 * every dialect. MySQL's `VARBINARY(1024)` columns hold exactly this much, and it stays far below
 * PostgreSQL's B-tree entry limit (about 2,700 bytes), so a key one dialect stores every dialect
 * stores. Longer ones are refused before anything reaches the database.
 */
export const MAX_KEY_BYTES = 1024;

/**
 * The longest lease the HTTP layer and `makeIdempotent` take, in seconds: 7 days. A lease is
 * renewed every third of it by a timer, and a longer lease would not protect anything a week
 * cannot (an owner frozen longer than that is dead).
 */
export const MAX_LEASE_SECONDS = 7 * 86_400;

// 10^11 seconds is the year 5138, while Date.now() in milliseconds has been above 10^12 since
// 2001: a clock at or past it is a milliseconds clock, not a seconds one.
const MILLISECONDS_LOOK = 1e11;

function describe(value: unknown): string {
  if (typeof value === 'string') return `the string ${JSON.stringify(value.slice(0, 40))}`;
  if (typeof value === 'bigint') return `the BigInt ${value}n`;
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'an array';
  if (typeof value === 'object') return 'an object';
  return `${typeof value} ${String(value)}`;
}

// A lone surrogate is turned into U+FFFD on its way to UTF-8, so two different JS strings would
// name the same row: refuse them instead of letting keys collide. NUL is refused because
// PostgreSQL text cannot hold it, and every dialect accepts the same keys. The length is
// checked on the UTF-8 bytes the databases keep, so the limit is the same on every dialect.
function checkText(value: unknown, what: string): string | undefined {
  if (typeof value !== 'string') return `${what} must be a string, got ${describe(value)}`;
  if (value.length === 0) return `${what} must not be empty`;
  if (!value.isWellFormed()) return `${what} contains a lone UTF-16 surrogate`;
  if (value.includes('\u0000')) return `${what} contains a NUL character`;
  // Only a string that may be too long is measured: 3 bytes is the most a UTF-16 unit takes.
  if (value.length * 3 > MAX_KEY_BYTES) {
    const bytes = Buffer.byteLength(value, 'utf8');
    if (bytes > MAX_KEY_BYTES) {
      return `${what} is ${bytes} UTF-8 bytes long; at most ${MAX_KEY_BYTES} are kept`;
    }
  }
  return undefined;
}

/**
 * Asserts that `key` is a non-empty, well-formed string without NUL characters, of at most
 * {@link MAX_KEY_BYTES} UTF-8 bytes.
 *
 * @throws {@link InvalidKeyError} otherwise
 */
export function assertKey(key: unknown): asserts key is string {
  const problem = checkText(key, 'key');
  if (problem) throw new InvalidKeyError(problem);
}

/**
 * Asserts that `fingerprint` is a non-empty, well-formed string without NUL characters, of at most
 * {@link MAX_KEY_BYTES} UTF-8 bytes.
 *
 * @throws {@link InvalidFingerprintError} otherwise
 */
export function assertFingerprint(fingerprint: unknown): asserts fingerprint is string {
  const problem = checkText(fingerprint, 'fingerprint');
  if (problem) throw new InvalidFingerprintError(problem);
}

/**
 * Asserts that a time (`expires`, `now`) is a finite number of the caller's clock.
 *
 * @param name - the argument's name, for the message
 * @throws {@link InvalidTimeError} otherwise
 */
export function assertTime(value: unknown, name: string): asserts value is number {
  if (typeof value !== 'number' || !Number.isFinite(value)) {
    throw new InvalidTimeError(`${name} must be a finite number, got ${describe(value)}`);
  }
}

function isIntegerIn(value: unknown, min: number, max: number): value is number {
  return typeof value === 'number' && Number.isInteger(value) && value >= min && value <= max;
}

/**
 * Asserts that `limit` is an integer from 1 to `max` ({@link MAX_LIMIT} unless given). Booleans,
 * floats, NaN, strings and null are refused rather than coerced. Every operation that takes a
 * `limit` checks it here, so a bad one is the same error everywhere.
 *
 * @throws {@link InvalidLimitError} otherwise
 */
export function assertLimit(limit: unknown, max: number = MAX_LIMIT): asserts limit is number {
  if (!isIntegerIn(limit, 1, max)) {
    throw new InvalidLimitError(
      `limit must be an integer from 1 to ${max}, got ${describe(limit)}`,
    );
  }
}

/**
 * Asserts that an option is an integer within `[min, max]`.
 *
 * @param name - the option's name, for the message
 * @throws {@link InvalidOptionError} otherwise
 */
export function assertIntegerOption(
  value: unknown,
  name: string,
  min: number,
  max: number,
): asserts value is number {
  if (!isIntegerIn(value, min, max)) {
    throw new InvalidOptionError(
      `${name} must be an integer from ${min} to ${max}, got ${describe(value)}`,
    );
  }
}

/**
 * Asserts that a lease is a finite number of seconds above 0 and at most
 * {@link MAX_LEASE_SECONDS}: the `leaseSeconds` option of the HTTP layer and of `makeIdempotent`.
 *
 * @throws {@link InvalidOptionError} otherwise
 */
export function assertLeaseSeconds(value: unknown): asserts value is number {
  assertSecondsOption('leaseSeconds', value);
}

/**
 * Asserts that the option `name` is a finite number of seconds above 0 and at most
 * {@link MAX_LEASE_SECONDS} (7 days, which also keeps it within a timer's range).
 *
 * @throws {@link InvalidOptionError} naming the option otherwise
 */
export function assertSecondsOption(name: string, value: unknown): asserts value is number {
  if (
    typeof value !== 'number' ||
    !Number.isFinite(value) ||
    value <= 0 ||
    value > MAX_LEASE_SECONDS
  ) {
    throw new InvalidOptionError(
      `${name} must be a number of seconds above 0 and at most ${MAX_LEASE_SECONDS} (7 days), got ${describe(value)}`,
    );
  }
}

/**
 * Calls the `now` option once and asserts that it is a clock in seconds: a finite number from 0
 * up to 10^11 (the year 5138). `Date.now` (milliseconds, above 10^12) is refused, since every
 * lease and retention deadline would then be a thousand times too short.
 *
 * @throws {@link InvalidOptionError} for a clock that throws, or answers anything else
 */
export function assertSecondsClock(now: () => number): void {
  let value: unknown;
  try {
    value = now();
  } catch (error) {
    throw new InvalidOptionError(`now() threw: ${(error as Error).message}`);
  }
  if (typeof value !== 'number' || !Number.isFinite(value) || value < 0) {
    throw new InvalidOptionError(
      `now() must return a finite number of seconds from 0 up, got ${String(value)}`,
    );
  }
  if (value >= MILLISECONDS_LOOK) {
    throw new InvalidOptionError(
      `now() returned ${value}, which looks like milliseconds: the clock is in seconds (Date.now() / 1000)`,
    );
  }
}
