import type { MaybePromise } from './store.js';

/** Whether `value` is a promise or any other thenable (an object or function with `then`). */
export function isThenable(value: unknown): value is PromiseLike<unknown> {
  return (
    (typeof value === 'object' || typeof value === 'function') &&
    value !== null &&
    typeof (value as { then?: unknown }).then === 'function'
  );
}

/**
 * Runs `next` on `value` once it is there: at once for a plain value, after it settles for a
 * promise. The one step that lets a single body serve a synchronous and an asynchronous driver.
 *
 * @example
 * ```ts
 * andThen(1, (n) => n + 1); // 2
 * await andThen(Promise.resolve(1), (n) => n + 1); // 2
 * ```
 */
export function andThen<A, B>(
  value: MaybePromise<A>,
  next: (value: A) => MaybePromise<B>,
): MaybePromise<B> {
  return isThenable(value)
    ? ((value as PromiseLike<A>).then(next) as Promise<B>)
    : next(value as A);
}
