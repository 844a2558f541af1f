import { compareKeys } from './order.js';

/** One call of a batched statement: the key it touches and the rest of its arguments. */
export interface BatchItem<A> {
  readonly key: string;
  readonly args: A;
}

/**
 * How a batched statement runs: `one` for a lone call (the plain single-row statement), `many`
 * for two or more calls of distinct keys, in ascending key order, answering one result per item
 * in that order.
 */
export interface BatchedStatement<A, R> {
  one(item: BatchItem<A>): Promise<R>;
  many(items: readonly BatchItem<A>[]): Promise<readonly R[]>;
  /**
   * Whether `error`, thrown by `many`, is the server's refusal of its statement, which then wrote
   * nothing, so that each call can run again on its own. By default, a PostgreSQL error response
   * (a severity and a SQLSTATE); a dialect whose driver reports its errors otherwise says here
   * how it does.
   */
  refused?(error: unknown): boolean;
}

/** How many statements of each size a {@link StatementBatch} sent. */
export interface BatchSizes {
  /** Calls made. */
  readonly calls: number;
  /** Statements sent for them (a batch of one included). */
  readonly statements: number;
  /** Statements sent, by the number of calls each carried: `{ 1: 40, 32: 7 }`. */
  readonly sizes: Readonly<Record<number, number>>;
}

interface Waiting<A, R> {
  readonly item: BatchItem<A>;
  readonly resolve: (value: R) => void;
  readonly reject: (reason: unknown) => void;
}

// Whether `error` (or the driver error drizzle wrapped in it) is the server's refusal of the
// statement: an error response, with its severity and SQLSTATE. The statement then failed and was
// rolled back whole, so nothing of the batch was written and each call can run again on its own.
// Any other error (a connection lost after the statement was sent, whose errno code can look like
// a SQLSTATE; an unconfirmed synchronous commit) leaves the outcome unknown or shared by every
// call, which all get it.
function rolledBack(error: unknown): boolean {
  const serverError = (value: unknown) => {
    const { code, severity } = (value ?? {}) as { code?: unknown; severity?: unknown };
    return typeof severity === 'string' && typeof code === 'string' && /^[0-9A-Z]{5}$/.test(code);
  };
  return serverError(error) || serverError((error as { cause?: unknown } | null)?.cause);
}

/**
 * Batching for one statement of an asynchronous database: the calls made in one turn of the event
 * loop go to the server together, as one statement over arrays (one round trip, one commit), once
 * the turn ends. Each call gets the result its own statement would have given it.
 *
 * ```
 *  turn n:   acquire(a) ─ sent at once (the last turn was quiet)
 *            acquire(b), acquire(a'), … acquire(z) ─ queued
 *  check:    one statement for b, … z (keys ascending) ─ each resolved with its row
 *            a' waits: a key is in one statement at a time
 *  turn n+1: every call queued (the last turn was a burst), a' among them once a answered
 * ```
 *
 * While calls come one at a time, each is sent at once as the single-row statement, with no added
 * delay; once they come in bursts, the first call of a turn waits for its batch too.
 *
 * A key is in at most one statement at a time: a call of a key already in the batch, or in a
 * statement not yet answered, waits for the next one, so calls of one key run in the order they
 * were made and each sees what the one before it wrote, as if they had run one after the other.
 * Keys go in ascending order, so two batches (of two processes) lock the rows they share in the
 * same order and cannot deadlock. When the server refuses a batch's statement (it was rolled back
 * whole), each call runs again on its own and gets exactly its own answer or error; when the
 * outcome is unknown (no answer from the server), every call of the batch fails with that error.
 *
 * @typeParam A - the arguments of one call besides its key
 * @typeParam R - the result of one call
 */
export class StatementBatch<A, R> {
  readonly #statement: BatchedStatement<A, R>;
  readonly #maxSize: number;
  #queue: Waiting<A, R>[] = [];
  #scheduled = false;
  // Whether the last turn's batch had more than one call: calls come in bursts, and the first
  // call of a turn waits for its batch instead of paying a statement of its own.
  #bursting = false;
  // The keys of the statements sent and not yet answered.
  readonly #inFlight = new Set<string>();
  #calls = 0;
  #statements = 0;
  readonly #sizes = new Map<number, number>();

  /**
   * @param statement - how a lone call and a batch of calls run
   * @param maxSize - the most calls one statement carries; the rest go in the next
   */
  constructor(statement: BatchedStatement<A, R>, maxSize: number) {
    this.#statement = statement;
    this.#maxSize = maxSize;
  }

  /** Runs the statement for `key`, in the batch of this turn. */
  run(key: string, args: A): Promise<R> {
    this.#calls += 1;
    return new Promise<R>((resolve, reject) => {
      const waiting = { item: { key, args }, resolve, reject };
      // While calls come singly, the first call of a turn goes at once, with no wait; once they
      // come in bursts, it waits for the turn's batch too, so a burst costs one statement.
      if (!this.#bursting && !this.#scheduled && !this.#inFlight.has(key)) {
        this.#schedule();
        this.#dispatch([waiting]);
        return;
      }
      this.#queue.push(waiting);
      this.#schedule();
    });
  }

  /** What was sent so far: calls, statements, and statements by size. */
  sizes(): BatchSizes {
    return {
      calls: this.#calls,
      statements: this.#statements,
      sizes: Object.fromEntries([...this.#sizes].sort(([a], [b]) => a - b)),
    };
  }

  #schedule(): void {
    if (this.#scheduled) return;
    this.#scheduled = true;
    setImmediate(() => {
      this.#scheduled = false;
      this.#flush();
    });
  }

  #flush(): void {
    const members: Waiting<A, R>[] = [];
    const picked = new Set<string>();
    const kept: Waiting<A, R>[] = [];
    let overflow = false;
    for (const waiting of this.#queue) {
      const { key } = waiting.item;
      if (this.#inFlight.has(key) || picked.has(key)) {
        kept.push(waiting);
      } else if (members.length === this.#maxSize) {
        kept.push(waiting);
        overflow = true;
      } else {
        picked.add(key);
        members.push(waiting);
      }
    }
    this.#queue = kept;
    // A call whose key is in flight waits until that statement has answered, so it sees what its
    // predecessor wrote; calls held back only by the size cap go in the next turn's statement.
    if (overflow) this.#schedule();
    this.#bursting = members.length > 1;
    if (members.length > 0) this.#dispatch(members);
  }

  // Sends `members` (of distinct keys, none in flight) as one statement.
  #dispatch(members: Waiting<A, R>[]): void {
    members.sort((a, b) => compareKeys(a.item.key, b.item.key));
    const keys = members.map((waiting) => waiting.item.key);
    for (const key of keys) this.#inFlight.add(key);
    this.#statements += 1;
    this.#sizes.set(members.length, (this.#sizes.get(members.length) ?? 0) + 1);
    void this.#send(members).finally(() => {
      for (const key of keys) this.#inFlight.delete(key);
      if (this.#queue.length > 0) this.#schedule();
    });
  }

  async #send(members: readonly Waiting<A, R>[]): Promise<void> {
    const [only] = members;
    if (members.length === 1 && only !== undefined) {
      await this.#statement.one(only.item).then(only.resolve, only.reject);
      return;
    }
    let results: readonly R[];
    try {
      results = await this.#statement.many(members.map((waiting) => waiting.item));
    } catch (error) {
      if (!(this.#statement.refused?.(error) ?? rolledBack(error))) {
        for (const waiting of members) waiting.reject(error);
        return;
      }
      await Promise.all(
        members.map((waiting) =>
          this.#statement.one(waiting.item).then(waiting.resolve, waiting.reject),
        ),
      );
      return;
    }
    members.forEach((waiting, index) => {
      waiting.resolve(results[index] as R);
    });
  }
}
