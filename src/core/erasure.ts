import { InvalidOptionError } from './errors.js';

// U+001F (unit separator) never occurs in a key (keys are printable ASCII) nor in a JSON-encoded
// scope (JSON escapes control characters), so the first one splits a stored id unambiguously,
// and an unscoped key can never look like a scoped one.
const SEPARATOR = '\u001f';

/**
 * The start of every id stored under `scope`: the scope as a JSON string, then U+001F. What
 * `storedId(scope, key)` puts before the key, and what `erase({ scope })` deletes by.
 *
 * @example
 * ```ts
 * scopePrefix('client-7'); // '"client-7"\u001f'
 * ```
 * @throws {@link InvalidOptionError} for a scope that is not a non-empty, well-formed string
 */
export function scopePrefix(scope: unknown): string {
  if (typeof scope !== 'string' || scope.length === 0 || !scope.isWellFormed()) {
    throw new InvalidOptionError('scope must be a non-empty, well-formed string');
  }
  return `${JSON.stringify(scope)}${SEPARATOR}`;
}

/** The options of `erase`. */
export interface EraseOptions {
  /** The scope whose answers are erased, as given to the HTTP layer's `scope` option. */
  readonly scope: string;
  /** Rows deleted per statement (one short transaction each): 1 to 10,000, default 500. */
  readonly batchSize?: number;
}

/** What `erase` did. */
export interface EraseResult {
  /** The keys (without their scope) whose answers were deleted, ascending. */
  readonly erased: string[];
  /** The keys of the scope still pending, left as they are: erase again once they are done. */
  readonly pending: string[];
}

/** The options of `rekey` and `sealingReport`. */
export interface RekeyOptions {
  /** Rows read per batch: 1 to 10,000, default 500. */
  readonly batchSize?: number;
}

/** What `rekey` did. */
export interface RekeyResult {
  /** Answers and step records re-sealed under the current key. */
  readonly resealed: number;
  /** Answers and step records already under the current key, left as they were. */
  readonly current: number;
  /**
   * The ids of rows whose answer or step record did not open (key id missing, or altered), left
   * as they were.
   */
  readonly unreadable: string[];
}

/** How the stored answers are kept, as `sealingReport` counts them. */
export interface SealingReport {
  /** Answers stored as plain JSON (kept before encryption was turned on, or without it). */
  readonly plaintext: number;
  /** Answers sealed under each key id. */
  readonly byKey: Readonly<Record<string, number>>;
  /** The keyring's current key id; `null` on a store without encryption. */
  readonly current: string | null;
  /** Key ids of sealed answers that the keyring holds but are not current: `rekey` moves them. */
  readonly retired: string[];
  /** Key ids of sealed answers the keyring lacks: those answers cannot be read. */
  readonly missing: string[];
}
