import { renewalIntervalMs } from './lease.js';

/** A running lease renewal. */
export interface Heartbeat {
  /** Stops renewing; an in-flight renewal may still land, and is fenced like any other write. */
  stop(): void;
}

// The owners renewed every `intervalMs`, in the order their next renewal is due, and one timer set
// for the first of them: claiming a key joins a set instead of starting a timer of its own, and
// finishing it leaves the set. A timer that finds nothing due sets itself for the next owner, or
// stops when there is none.
class Schedule {
  readonly #intervalMs: number;
  // A Set iterates in insertion order, and every owner enters it due one interval from now, so
  // the first entry is always the one due first.
  readonly #beats = new Set<Beat>();
  #armed = false;

  constructor(intervalMs: number) {
    this.#intervalMs = intervalMs;
  }

  join(beat: Beat): void {
    beat.due = performance.now() + this.#intervalMs;
    this.#beats.add(beat);
    if (!this.#armed) this.#arm(beat.due);
  }

  leave(beat: Beat): void {
    this.#beats.delete(beat);
  }

  #arm(due: number): void {
    this.#armed = true;
    const timer = setTimeout(() => this.#tick(), Math.max(0, due - performance.now()));
    // A beat must never keep a process alive that has nothing else to do.
    timer.unref();
  }

  #tick(): void {
    this.#armed = false;
    const now = performance.now();
    for (const beat of this.#beats) {
      if (beat.due > now) break;
      // Due again one interval from now: back to the end, where the loop stops at it.
      this.#beats.delete(beat);
      beat.due = now + this.#intervalMs;
      this.#beats.add(beat);
      beat.fire();
    }
    for (const next of this.#beats) {
      this.#arm(next.due);
      break;
    }
  }
}

const schedules = new Map<number, Schedule>();

class Beat implements Heartbeat {
  due = 0;
  readonly #renew: () => Promise<boolean>;
  readonly #schedule: Schedule;

  constructor(renew: () => Promise<boolean>, schedule: Schedule) {
    this.#renew = renew;
    this.#schedule = schedule;
    schedule.join(this);
  }

  fire(): void {
    Promise.resolve()
      .then(this.#renew)
      .then(
        (renewed) => {
          if (!renewed) this.stop();
        },
        // Tried again at the next beat; see heartbeat.
        () => undefined,
      );
  }

  stop(): void {
    this.#schedule.leave(this);
  }
}

/**
 * Calls `renew` every third of `leaseSeconds`, so a live owner keeps its key however long its work
 * runs, and only a dead or frozen process lets its lease lapse. A renewal that fails (the database
 * is briefly away) is tried again at the next beat: the lease outlasts two missed beats, and the
 * fenced write at the end tells the owner whether it kept the key. A renewal refused by the fencing
 * token (`renew` resolves `false`: the key was taken over, released or finished) stops the beat.
 * The owners of one lease length share one timer.
 *
 * @param renew - extends the owner's lease, fenced by its token; `false` when the row is no longer
 * its
 * @param leaseSeconds - the lease, in seconds
 */
export function heartbeat(renew: () => Promise<boolean>, leaseSeconds: number): Heartbeat {
  const intervalMs = renewalIntervalMs(leaseSeconds);
  let schedule = schedules.get(intervalMs);
  if (schedule === undefined) {
    schedule = new Schedule(intervalMs);
    schedules.set(intervalMs, schedule);
  }
  return new Beat(renew, schedule);
}
