import type { Client } from '@libsql/client';

/** Runs a write after every write queued before it on the same client has settled. */
export type WriteQueue = <T>(write: () => Promise<T>) => Promise<T>;

// One queue per client, so every store and every transaction runner over it shares the queue.
const queues = new WeakMap<Client, WriteQueue>();

function noop(): void {}

/**
 * The write queue of `client`: its stores' writes and its runners' transactions, one at a time
 * in the order they came.
 *
 * A write needs SQLite's write lock, and libSQL's local client waits for it synchronously, on
 * the event loop. A transaction of `libsqlTransaction` holds that lock across `await`s, while its
 * handler runs; a write from another connection of the same process in that time would block the
 * event loop until the busy timeout, so the transaction holding the lock could never go on to
 * commit, and the write would fail with `SQLITE_BUSY`. Through the queue, such a write waits (as a
 * promise) for the transaction to end instead, and never meets a lock held in this process.
 */
export function writeQueue(client: Client): WriteQueue {
  let queue = queues.get(client);
  if (queue === undefined) {
    let tail: Promise<unknown> = Promise.resolve();
    queue = (write) => {
      const turn = tail.then(write);
      // The next write waits for this one to settle, whatever its outcome.
      tail = turn.then(noop, noop);
      return turn;
    };
    queues.set(client, queue);
  }
  return queue;
}
