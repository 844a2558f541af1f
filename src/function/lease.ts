import { renewalIntervalMs } from '../core/lease.js';
import type { IdempotencyStore, LeasedIdempotencyStore } from '../core/store.js';
import type { KeyOwner } from './transaction.js';

/** Whether `store` has fenced leases (`acquire`, `renew`, fenced `finish` and `release`). */
export function isLeased(
  store: IdempotencyStore<unknown>,
): store is LeasedIdempotencyStore<unknown> {
  const candidate = store as Partial<LeasedIdempotencyStore<unknown>>;
  return (
    typeof candidate.acquire === 'function' &&
    typeof candidate.renew === 'function' &&
    typeof candidate.markUnrecorded === 'function'
  );
}

/**
 * Renews the owner's lease every third of `leaseSeconds` while its function runs, so a slow but
 * live call keeps its key and only a dead or frozen one loses it. Returns the function that stops
 * it. A renewal that fails or is refused (the key was taken over) is not retried: the fenced write
 * at the end tells the call what happened.
 */
export function startHeartbeat(
  store: LeasedIdempotencyStore<unknown>,
  owner: Required<KeyOwner>,
  leaseSeconds: number,
  now: () => number,
): () => void {
  let stopped = false;
  const timer = setInterval(() => {
    Promise.resolve()
      .then(() => store.renew(owner.key, owner.digest, owner.attempt, now() + leaseSeconds))
      .then(
        (renewed) => {
          if (!renewed) stop();
        },
        // A store error now may pass; the lease still runs until its deadline.
        () => undefined,
      );
  }, renewalIntervalMs(leaseSeconds));
  // A pending renewal must not keep a process alive that has nothing else to do.
  timer.unref();
  function stop(): void {
    if (stopped) return;
    stopped = true;
    clearInterval(timer);
  }
  return stop;
}
