import {
  InvalidDigestError,
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
// PostgreSQL text cannot hold it, and every dialect accepts the same keys.
function checkText(value: unknown, what: string): string | undefined {
  if (typeof value !== 'string') return `${what} must be a string, got ${describe(value)}`;
  if (value.length === 0) return `${what} must not be empty`;
  if (!value.isWellFormed()) return `${what} contains a lone UTF-16 surrogate`;
  if (value.includes('\u0000')) return `${what} contains a NUL character`;
  return undefined;
}

/**
 * Asserts that `key` is a non-empty, well-formed string without NUL characters.
 *
 * @throws {@link InvalidKeyError} otherwise
 */
export function assertKey(key: unknown): asserts key is string {
  const problem = checkText(key, 'key');
  if (problem) throw new InvalidKeyError(problem);
}

/**
 * Asserts that `digest` is a non-empty, well-formed string without NUL characters.
 *
 * @throws {@link InvalidDigestError} otherwise
 */
export function assertDigest(digest: unknown): asserts digest is string {
  const problem = checkText(digest, 'digest');
  if (problem) throw new InvalidDigestError(problem);
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
 * Asserts that `limit` is an integer from 1 to {@link MAX_LIMIT}. Booleans, floats, NaN, strings
 * and null are refused rather than coerced.
 *
 * @throws {@link InvalidLimitError} otherwise
 */
export function assertLimit(limit: unknown): asserts limit is number {
  if (!isIntegerIn(limit, 1, MAX_LIMIT)) {
    throw new InvalidLimitError(
      `limit must be an integer from 1 to ${MAX_LIMIT}, got ${describe(limit)}`,
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
 * Asserts that an option is a finite number greater than or equal to `min`.
 *
 * @param name - the option's name, for the message
 * @throws {@link InvalidOptionError} otherwise
 */
export function assertNumberOption(
  value: unknown,
  name: string,
  min: number,
): asserts value is number {
  if (typeof value !== 'number' || !Number.isFinite(value) || value < min) {
    throw new InvalidOptionError(
      `${name} must be a finite number of at least ${min}, got ${describe(value)}`,
    );
  }
}
