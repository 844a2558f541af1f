import { InvalidArgumentError } from 'commander';
import { IdempotencyError, InvalidTimeError } from '../core/errors.js';
import { pendingLimit } from '../core/lease.js';
import { assertTableName } from '../core/table-name.js';
import {
  assertFingerprint,
  assertIntegerOption,
  assertLimit,
  MAX_BATCH_SIZE,
} from '../core/validation.js';
import { assertSchemaName } from '../pg/identifier.js';
import { MAX_BATCH_MILLIS } from '../sweep.js';
import { parseKeyWord } from './keys.js';

const INTEGER = /^\d+$/;
const DECIMAL = /^-?\d+(\.\d+)?$/;

// Each parser runs while commander reads the arguments, before any database is opened, so a bad
// flag is a usage error that changes nothing. Ranges come from the library's own validators.
function usingLibraryCheck(check: () => void): void {
  try {
    check();
  } catch (error) {
    if (error instanceof IdempotencyError) throw new InvalidArgumentError(error.message);
    throw error;
  }
}

function integer(text: string): number {
  if (!INTEGER.test(text)) throw new InvalidArgumentError('expected a whole number.');
  return Number(text);
}

/** `--db PATH`: any non-empty path; `--db=` would otherwise be reported as a missing database. */
export function parseDbPath(text: string): string {
  if (text === '') throw new InvalidArgumentError('expected a file path.');
  return text;
}

/** `--limit N` of `expired` and `purge`: an integer from 1 to 100. */
export function parseLimit(text: string): number {
  const limit = integer(text);
  usingLibraryCheck(() => assertLimit(limit));
  return limit;
}

/** `--batch N` of `sweep`: an integer from 1 to 10,000. */
export function parseBatch(text: string): number {
  const batch = integer(text);
  usingLibraryCheck(() => assertIntegerOption(batch, 'batch', 1, MAX_BATCH_SIZE));
  return batch;
}

/** `--max-batches N` of `sweep`: a positive integer. */
export function parseMaxBatches(text: string): number {
  const max = integer(text);
  usingLibraryCheck(() => assertIntegerOption(max, 'max-batches', 1, Number.MAX_SAFE_INTEGER));
  return max;
}

/** `--batch-millis MS` of `sweep`: a decimal number of milliseconds, above 0 and at most 60,000. */
export function parseBatchMillis(text: string): number {
  const millis = Number(text);
  if (!DECIMAL.test(text) || millis <= 0 || millis > MAX_BATCH_MILLIS) {
    throw new InvalidArgumentError(
      `expected a number of milliseconds greater than 0 and at most ${MAX_BATCH_MILLIS}.`,
    );
  }
  return millis;
}

/** `--max-seconds S` of `sweep`: a positive decimal number. */
export function parseMaxSeconds(text: string): number {
  if (!DECIMAL.test(text) || Number(text) <= 0) {
    throw new InvalidArgumentError('expected a number of seconds greater than 0.');
  }
  return Number(text);
}

const DURATION = /^(\d+(?:\.\d+)?)(ms|s|m|h)?$/;
const DURATION_SECONDS = { ms: 0.001, s: 1, m: 60, h: 3600 } as const;

/**
 * `--every D` of `sweep`: a duration such as `5m`, `30s`, `1h` or `250ms` (a bare number is
 * seconds), above 0 and at most about 23 days (what a Node timer can wait). Answers seconds.
 */
export function parseDuration(text: string): number {
  const match = DURATION.exec(text.trim());
  const seconds =
    match === null
      ? Number.NaN
      : Number(match[1]) * DURATION_SECONDS[(match[2] ?? 's') as keyof typeof DURATION_SECONDS];
  if (!(seconds > 0 && seconds <= 2_000_000)) {
    throw new InvalidArgumentError(
      'expected a duration such as 30s, 5m or 1h, greater than 0 and at most 23 days.',
    );
  }
  return seconds;
}

/** `--now T`: a decimal number of seconds on the application's clock. */
export function parseNow(text: string): number {
  const now = Number(text);
  if (!DECIMAL.test(text) || !Number.isFinite(now)) {
    throw new InvalidArgumentError('expected a decimal number of epoch seconds.');
  }
  return now;
}

// 10^11 seconds is the year 5138, while milliseconds since 1970 have been above 10^12 since 2001.
const MILLISECONDS_LOOK = 1e11;
const YEAR_SECONDS = 366 * 86_400;

/**
 * The clock check of `--now`, run once every flag is read: a time that looks like milliseconds,
 * or that lies more than a year past the wall clock, would make a sweep delete answers that are
 * still owed to retries, so it is refused unless `--force` is given. Times in the past are
 * accepted: judging expiry early deletes less, never more.
 *
 * @throws {@link InvalidTimeError} (a usage error) for such a time without `force`
 */
export function assertSaneNow(now: number | undefined, force: boolean, wall: number): void {
  if (now === undefined || force) return;
  if (now >= MILLISECONDS_LOOK && now / 1000 <= wall + YEAR_SECONDS) {
    throw new InvalidTimeError(
      `--now ${now} looks like milliseconds: it is in seconds (${Math.floor(now / 1000)}?); pass --force to use it anyway`,
    );
  }
  if (now > wall + YEAR_SECONDS) {
    throw new InvalidTimeError(
      `--now ${now} is more than a year after the wall clock (${Math.floor(wall)}), which would expire answers still owed to retries; pass --force to use it anyway`,
    );
  }
}

/** `--schema NAME`: a PostgreSQL schema name of at most 63 bytes. */
export function parseSchema(text: string): string {
  usingLibraryCheck(() => assertSchemaName(text));
  return text;
}

/** `--table NAME`: the keys table's name, as `sqliteKeysTable` and `pgKeysTable` accept it. */
export function parseTable(text: string): string {
  usingLibraryCheck(() => assertTableName(text));
  return text;
}

/** `--limit N` of `pending`: an integer from 1 to 10,000. */
export function parsePendingLimit(text: string): number {
  const limit = integer(text);
  usingLibraryCheck(() => pendingLimit(limit));
  return limit;
}

/**
 * `--fingerprint F` of `release`: a non-empty fingerprint, as the store accepts it, typed as it is
 * or as the JSON literal `idem show` prints for one that is not plainly printable.
 */
export function parseFingerprint(text: string): string {
  const fingerprint = parseKeyWord(text);
  usingLibraryCheck(() => assertFingerprint(fingerprint));
  return fingerprint;
}
