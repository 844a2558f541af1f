import { renewalIntervalMs } from './lease.js';

/** A running lease renewal. */
export interface Heartbeat {
  /** Stops renewing; an in-flight renewal may still land, and is fenced like any other write. */
  stop(): void;
}

/**
 * Calls `renew` every third of `leaseSeconds`, so a live owner keeps its key however long its work
 * runs, and only a dead or frozen process lets its lease lapse. A renewal that fails (the database
 * is briefly away) is tried again at the next beat: the lease outlasts two missed beats, and the
 * fenced write at the end tells the owner whether it kept the key. A renewal refused by the fencing
 * token (`renew` resolves `false`: the key was taken over, released or finished) stops the beat.
 *
 * @param renew - extends the owner's lease, fenced by its token; `false` when the row is no longer its
 * @param leaseSeconds - the lease, in seconds
 */
export function heartbeat(renew: () => Promise<boolean>, leaseSeconds: number): Heartbeat {
  let stopped = false;
  const timer = setInterval(() => {
    Promise.resolve()
      .then(renew)
      .then(
        (renewed) => {
          if (!renewed) stop();
        },
        // Tried again at the next beat; see above.
        () => undefined,
      );
  }, renewalIntervalMs(leaseSeconds));
  // A beat must never keep a process alive that has nothing else to do.
  timer.unref();
  function stop(): void {
    if (stopped) return;
    stopped = true;
    clearInterval(timer);
  }
  return { stop };
}
