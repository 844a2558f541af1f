import { InvalidOptionError } from '../core/errors.js';
import type { JsonValue } from '../core/json.js';
import { decodeResult } from '../core/result-encoding.js';
import { parseStepRecord, type StepLog } from '../core/steps.js';

/** Options of {@link resumeAbandoned}. */
export interface ResumeAbandonedOptions {
  /** The clock, in seconds, as the wrapped functions' `now`. Default: the wall clock. */
  readonly now?: () => number;
  /** At most this many keys in one pass, ascending by key: 1 to 10,000. Default 100. */
  readonly limit?: number;
}

/** What {@link resumeAbandoned} did with one key whose lease had lapsed. */
export type ResumeOutcome =
  | { readonly key: string; readonly outcome: 'completed'; readonly lastStep: string | null }
  | {
      readonly key: string;
      readonly outcome: 'skipped';
      readonly reason: 'no handler' | 'nothing recorded';
    }
  | { readonly key: string; readonly outcome: 'failed'; readonly error: unknown };

// The handler whose prefix is the longest that starts `key`.
function handlerOf<F>(handlers: Readonly<Record<string, F>>, key: string): F | undefined {
  let best: string | undefined;
  for (const prefix of Object.keys(handlers)) {
    if (key.startsWith(prefix) && (best === undefined || prefix.length > best.length)) {
      best = prefix;
    }
  }
  return best === undefined ? undefined : handlers[best];
}

/**
 * The completer: finds the keys of `log`'s store whose lease lapsed (their owner died or gave up
 * after recording steps) and drives each to its answer by calling the stepped `makeIdempotent`
 * function registered for its key prefix with the arguments recorded with its first step. The
 * call takes the key over like any retry (one owner, fenced), goes on from the last recorded step
 * and records the answer, which the client's later retry replays. A key with no recorded step (its
 * call did nothing lasting) is left to the client's retry.
 *
 * @param log - the step log the functions were made with
 * @param handlers - the stepped functions, by the prefix of the keys they make
 * @param options - the clock and how many keys in one pass
 * @returns one outcome per lapsed key looked at
 * @throws {@link InvalidOptionError} for a bad limit; what the store throws when listing keys
 * @example
 * ```ts
 * import { makeIdempotent, resumeAbandoned, type Step } from 'drizzle-idempotency/function';
 * import { openSqliteStore, type SqliteHandlerTransaction, sqliteSteps } from 'drizzle-idempotency/sqlite';
 *
 * const store = openSqliteStore('./app.db');
 * const steps = sqliteSteps(store, { secret: 'at least 16 bytes of secret' });
 * const pay = makeIdempotent(
 *   async (step: Step<SqliteHandlerTransaction>, id: string) => step('charge', () => `ch-${id}`),
 *   { steps, key: (id) => `pay:${id}` },
 * );
 * await resumeAbandoned(steps, { 'pay:': pay });
 * store.close();
 * ```
 */
export async function resumeAbandoned<TX>(
  log: StepLog<TX>,
  // biome-ignore lint/suspicious/noExplicitAny: each handler takes its own arguments, kept in steps
  handlers: Readonly<Record<string, (...args: any[]) => Promise<unknown>>>,
  options: ResumeAbandonedOptions = {},
): Promise<ResumeOutcome[]> {
  const now = options.now ?? (() => Date.now() / 1000);
  if (typeof now !== 'function') throw new InvalidOptionError('now must be a function');
  const pending = await log.store.pendingKeys({
    now: now(),
    stale: true,
    limit: options.limit ?? 100,
  });
  const outcomes: ResumeOutcome[] = [];
  for (const row of pending) {
    if (row.state !== 'lapsed') continue;
    const handler = handlerOf(handlers, row.key);
    if (handler === undefined) {
      outcomes.push({ key: row.key, outcome: 'skipped', reason: 'no handler' });
      continue;
    }
    try {
      // Inside the try: a record sealed under a key id the keyring lacks fails this key alone.
      const record = parseStepRecord(await log.read(row.key, row.fingerprint));
      if (record.args === undefined || record.steps.length === 0) {
        outcomes.push({ key: row.key, outcome: 'skipped', reason: 'nothing recorded' });
        continue;
      }
      const args = decodeResult(record.args as JsonValue);
      await handler(...(Array.isArray(args) ? args : []));
      const last = record.steps[record.steps.length - 1]?.[0] ?? null;
      outcomes.push({ key: row.key, outcome: 'completed', lastStep: last });
    } catch (error) {
      outcomes.push({ key: row.key, outcome: 'failed', error });
    }
  }
  return outcomes;
}
