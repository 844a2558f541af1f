import { setTimeout as sleep } from 'node:timers/promises';
import { InvalidOptionError } from './errors.js';
import { KeyStatus } from './status.js';
import type { IdempotencyRecord, IdempotencyStore } from './store.js';
import { assertIntegerOption } from './validation.js';

/** The longest a duplicate may wait for the call or request that owns its key: 10 minutes. */
export const MAX_WAIT_MS = 10 * 60 * 1000;

/**
 * The shortest first pause between two looks of a waiting duplicate, in milliseconds. Below it a
 * crowd of waiters would keep the database busy reading one row for nothing.
 */
export const MIN_WAIT_INTERVAL_MS = 10;

/** The first pause between two looks of a waiting duplicate when none is given. */
export const DEFAULT_WAIT_INTERVAL_MS = 50;

/**
 * The longest pause between two looks once the pauses have doubled, in milliseconds, unless the
 * first pause is longer still.
 */
export const MAX_WAIT_BACKOFF_MS = 1000;

/** The `wait` option, checked: how long to wait at most, and the first pause between looks. */
export interface WaitSettings {
  readonly timeoutMs: number;
  readonly intervalMs: number;
}

/**
 * Checks the `wait` option of the HTTP layer and of `makeIdempotent`: `timeoutMs` an integer from
 * 0 to {@link MAX_WAIT_MS} (0 when not given: no waiting), `intervalMs` an integer from
 * {@link MIN_WAIT_INTERVAL_MS} to {@link MAX_WAIT_MS} ({@link DEFAULT_WAIT_INTERVAL_MS} when
 * not given).
 *
 * @throws {@link InvalidOptionError} otherwise
 */
export function resolveWait(
  wait: { readonly timeoutMs: number; readonly intervalMs?: number } | undefined,
): WaitSettings {
  if (wait !== undefined && (typeof wait !== 'object' || wait === null)) {
    throw new InvalidOptionError('wait must be an object { timeoutMs, intervalMs? }');
  }
  const timeoutMs = wait?.timeoutMs ?? 0;
  assertIntegerOption(timeoutMs, 'wait.timeoutMs', 0, MAX_WAIT_MS);
  const intervalMs = wait?.intervalMs ?? DEFAULT_WAIT_INTERVAL_MS;
  assertIntegerOption(intervalMs, 'wait.intervalMs', MIN_WAIT_INTERVAL_MS, MAX_WAIT_MS);
  return { timeoutMs, intervalMs };
}

/** What a duplicate waiting for its key's owner found when it stopped waiting. */
export type WaitOutcome<T> =
  /** The row is gone, or its lease lapsed: try to claim the key. */
  | { readonly status: 'claim' }
  /** The owner finished: its answer (or the answer past retention) is in `record`. */
  | { readonly status: 'done'; readonly record: IdempotencyRecord<T> }
  /** The key now holds another payload's row. */
  | { readonly status: 'mismatch'; readonly record: IdempotencyRecord<T> }
  /**
   * Still pending when the time ran out, or marked unrecorded (it waits for an operator, so
   * waiting longer is pointless). `record` is the row as last seen, `null` if none was seen.
   */
  | { readonly status: 'inProgress'; readonly record: IdempotencyRecord<T> | null };

/** Where and how long {@link waitForOwner} waits. */
export interface WaitFor<T> {
  readonly store: IdempotencyStore<T>;
  readonly key: string;
  /** The waiter's own fingerprint. */
  readonly fingerprint: string;
  /** The caller's clock in seconds, to tell a lapsed lease. */
  readonly now: () => number;
  /** When to give up, on `performance.now()`. */
  readonly deadline: number;
  /** The first pause between looks, in milliseconds. */
  readonly intervalMs: number;
  /** The row the claim saw, returned if the deadline has already passed. */
  readonly seen: IdempotencyRecord<T> | null;
}

// "Equal jitter": at least half the pause, so waiters make progress, and a random rest, so a
// crowd that arrived together does not look at the row together.
function jittered(pauseMs: number): number {
  return pauseMs / 2 + Math.random() * (pauseMs / 2);
}

/**
 * Waits for the owner of a key to finish, looking at its row with reads only (`get`), never a
 * write: a crowd of duplicates behind one owner costs the database one indexed read each per
 * pause. The pauses start at `intervalMs` and double, with jitter, up to
 * {@link MAX_WAIT_BACKOFF_MS} (or `intervalMs` if longer); the last look is at the deadline. It
 * returns as soon as the claim may succeed (the row is gone, or its lease lapsed: only then does
 * the caller write), or the row is settled (done, or another payload's). One loop for the HTTP
 * layer and `makeIdempotent`.
 *
 * @returns what the row became; see {@link WaitOutcome}
 */
export async function waitForOwner<T>(wait: WaitFor<T>): Promise<WaitOutcome<T>> {
  const { store, key, fingerprint } = wait;
  const cap = Math.max(wait.intervalMs, MAX_WAIT_BACKOFF_MS);
  let pause = wait.intervalMs;
  let record = wait.seen;
  for (;;) {
    const left = wait.deadline - performance.now();
    if (left <= 0) return { status: 'inProgress', record };
    await sleep(Math.min(jittered(pause), left));
    pause = Math.min(pause * 2, cap);
    const row = await store.get(key);
    if (row === null) return { status: 'claim' };
    if (row.fingerprint !== fingerprint) return { status: 'mismatch', record: row };
    if (row.status === KeyStatus.done) return { status: 'done', record: row };
    record = row;
    if (row.unrecorded) return { status: 'inProgress', record };
    if (row.leaseUntil !== null && row.leaseUntil <= wait.now()) return { status: 'claim' };
  }
}
