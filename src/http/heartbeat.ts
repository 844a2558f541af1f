import { renewalIntervalMs } from '../core/lease.js';
import type { LeasedIdempotencyStore } from '../core/store.js';
import type { ResolvedOptions } from './options.js';

/** A running lease renewal. */
export interface Heartbeat {
  /** Stops renewing; an in-flight renewal may still land, and is fenced like any other write. */
  stop(): void;
}

/**
 * Renews the lease of the owner holding `attempt` every third of `leaseSeconds`, so a live handler
 * keeps its key however long it runs, and only a dead or frozen process lets its lease lapse. A
 * renewal that fails (the database is briefly away) is tried again at the next beat: the lease
 * outlasts two missed beats. A renewal refused by the fencing token (the key was taken over,
 * released or finished) stops the beat.
 */
export function heartbeat(
  store: LeasedIdempotencyStore<unknown>,
  settings: ResolvedOptions,
  id: string,
  fingerprint: string,
  attempt: number,
): Heartbeat {
  let stopped = false;
  const timer = setInterval(() => {
    void (async () => {
      try {
        const renewed = await store.renew(
          id,
          fingerprint,
          attempt,
          settings.now() + settings.leaseSeconds,
        );
        if (!renewed) stop();
      } catch {
        // Tried again at the next beat; see above.
      }
    })();
  }, renewalIntervalMs(settings.leaseSeconds));
  // A beat must never keep a process alive that has nothing else to do.
  timer.unref();
  function stop(): void {
    if (stopped) return;
    stopped = true;
    clearInterval(timer);
  }
  return { stop };
}
