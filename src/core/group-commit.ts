import { StoreClosedError } from './errors.js';

/** Runs a synchronous body inside one transaction, committing when it returns. */
export type Transact = <R>(body: () => R) => R;

interface Queued {
  readonly run: () => unknown;
  readonly resolve: (value: unknown) => void;
  readonly reject: (reason: unknown) => void;
}

// Runs `op` now, outside any batch, turning what it throws into a rejection.
function runNow<R>(op: () => R): Promise<R> {
  try {
    return Promise.resolve(op());
  } catch (error) {
    return Promise.reject(error);
  }
}

/**
 * Group commit for a synchronous database: operations that arrive while others are waiting in
 * the same turn of the event loop run together in one transaction, so a burst of concurrent
 * requests pays for one commit instead of one each.
 *
 * ```
 *  turn n:   op1 ─ runs at once (the last turn was quiet) ─ resolved
 *            op2, op3, … op32 ─ queued
 *  check:    BEGIN IMMEDIATE; op2; op3; … op32; COMMIT ─ all resolved, in arrival order
 *  turn n+1: op1' … op32' ─ all queued (the last turn was a burst)
 *  check:    BEGIN IMMEDIATE; op1'; … op32'; COMMIT
 * ```
 *
 * While calls come one at a time, each runs at once, with no added delay; once they come in
 * bursts, the first call of a turn waits for the batch too, so a burst costs one commit. Every
 * promise resolves only after its transaction committed. If any operation of a batch throws, the
 * whole batch is rolled back and each operation is run again on its own, so each gets exactly the
 * result or error it would have had alone, and a bad argument never takes its neighbours down. If
 * the transaction itself cannot begin or commit, every operation of the batch fails with that
 * error and nothing of it is written.
 */
export class GroupCommit {
  readonly #transact: Transact;
  #queue: Queued[] = [];
  #busyTurn = false;
  // Whether the last flush ran a batch: then calls keep coming in bursts, and the first call of a
  // turn waits for its batch too instead of paying a commit of its own.
  #bursting = false;
  #batches = 0;
  // Set by `close`: later calls are refused.
  #closed = false;
  // The closes waiting for this turn's flush; made only by a close, so a turn builds no promise.
  #afterFlush: (() => void)[] | undefined;
  // The flush of a turn, one function for every turn.
  readonly #flushTurn = (): void => {
    this.#flush();
    const waiting = this.#afterFlush;
    this.#afterFlush = undefined;
    if (waiting !== undefined) for (const resume of waiting) resume();
  };

  /** @param transact - runs a body in one transaction of the underlying connection */
  constructor(transact: Transact) {
    this.#transact = transact;
  }

  /** The number of multi-operation transactions committed or attempted so far. */
  get batches(): number {
    return this.#batches;
  }

  /**
   * Runs a read-only `op`. Reads commit nothing, so there is nothing to save by batching them: one
   * runs at once unless writes are queued, in which case it waits behind them to keep call order.
   * It does not count as the turn's first call, so a request that reads its key and then writes it
   * in the same turn still has its write run at once while calls come singly.
   */
  read<R>(op: () => R): Promise<R> {
    if (this.#closed) return Promise.reject(new StoreClosedError());
    return this.#queue.length > 0 ? this.run(op) : runNow(op);
  }

  /** Runs `op`, alone or in a batch with the operations queued beside it, in arrival order. */
  run<R>(op: () => R): Promise<R> {
    if (this.#closed) return Promise.reject(new StoreClosedError());
    const firstOfTurn = !this.#busyTurn;
    if (firstOfTurn) {
      this.#busyTurn = true;
      setImmediate(this.#flushTurn);
    }
    if (firstOfTurn && !this.#bursting) return runNow(op);
    return new Promise<R>((resolve, reject) => {
      this.#queue.push({ run: op, resolve: resolve as (value: unknown) => void, reject });
    });
  }

  /**
   * Runs `op` (the close of the connection) once every operation called before has run, on its
   * own and outside any transaction: inside the batch it would end the connection before the
   * batch commits. Every call after this one rejects with {@link StoreClosedError}; a second
   * `close` runs its `op` after the first's.
   */
  close<R>(op: () => R): Promise<R> {
    this.#closed = true;
    if (!this.#busyTurn) return runNow(op);
    const waiting = this.#afterFlush ?? [];
    this.#afterFlush = waiting;
    return new Promise<void>((resume) => waiting.push(resume)).then(op);
  }

  #flush(): void {
    const batch = this.#queue;
    this.#queue = [];
    this.#busyTurn = false;
    this.#bursting = batch.length > 1;
    if (batch.length === 0) return;
    if (batch.length > 1) {
      this.#batches += 1;
      const body = { started: false, finished: false };
      try {
        const results = this.#transact(() => {
          body.started = true;
          const values = batch.map((queued) => queued.run());
          body.finished = true;
          return values;
        });
        batch.forEach((queued, index) => {
          queued.resolve(results[index]);
        });
        return;
      } catch (error) {
        // The transaction could not start or commit (a lock held past the busy timeout, a full
        // disk): running each operation again would only repeat that wait, so all of them fail.
        if (!body.started || body.finished) {
          for (const queued of batch) queued.reject(error);
          return;
        }
        // One operation threw and the batch was rolled back: each runs again below, on its own.
      }
    }
    for (const queued of batch) {
      try {
        queued.resolve(queued.run());
      } catch (error) {
        queued.reject(error);
      }
    }
  }
}
