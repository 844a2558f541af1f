/** A promise and the functions that settle it, for a test to hold a handler until it says so. */
export interface Deferred<T> {
  readonly promise: Promise<T>;
  readonly resolve: (value: T) => void;
  readonly reject: (error: unknown) => void;
}

/** A promise the test settles itself, e.g. to keep a handler running until it resolves it. */
export function deferred<T = void>(): Deferred<T> {
  let resolve!: (value: T) => void;
  let reject!: (error: unknown) => void;
  const promise = new Promise<T>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  return { promise, resolve, reject };
}

/**
 * Waits until `condition` holds, looking again every `intervalMs`: a wait by condition, never by
 * a fixed sleep; the test's own timeout bounds it.
 */
export async function until(
  condition: () => boolean | Promise<boolean>,
  intervalMs = 5,
): Promise<void> {
  while (!(await condition())) await new Promise((resolve) => setTimeout(resolve, intervalMs));
}

/** A promise under watch, for a test to prove a call has not answered yet. */
export interface Watched<T> {
  readonly promise: Promise<T>;
  /** Whether the promise has settled, fulfilled or rejected. */
  settled(): boolean;
}

/**
 * Watches `promise` without handling it for the caller: `settled()` turns true once it settles,
 * and `promise` is the same promise, still to be awaited.
 */
export function watched<T>(promise: Promise<T>): Watched<T> {
  let settled = false;
  const mark = () => {
    settled = true;
  };
  promise.then(mark, mark);
  return { promise, settled: () => settled };
}
