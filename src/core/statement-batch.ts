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

// Whether the server answered `error` with a SQLSTATE: the statement failed and was rolled back
// whole, so nothing of the batch was written and each call can run again on its own. An error
// without one (a connection lost after the statement was sent, an unconfirmed synchronous commit)
// leaves the outcome unknown or shared by every call, which all get it.
function rolledBack(error: unknown): boolean {
  const { code, cause } = (error ?? {}) as { code?: unknown; cause?: unknown };
  const state = typeof code === 'string' ? code : (cause as { code?: unknown } | undefined)?.code;
  return typeof state === 'string' && /^[0-9A-Z]{5}$/.test(state);
}

/**
 * Batching for one statement of an asynchronous database: the calls made in one turn of the event
 * loop go to the server together, as one statement over arrays (one round trip, one commit), once
 * the turn ends. Each call gets the result its own statement would have given it.
 *
 * ```
 *  turn n:  acquire(a), acquire(b), acquire(a'), … acquire(z)   ─ queued
 *  check:   one statement for a, b, … z (keys ascending)         ─ each resolved with its row
 *           a' waits: a key is in a batch at most once
 *  next:    one statement for a'                                 ─ sees what a left
 * ```
 *
 * A key is in at most one statement at a time: a call of a key already in the batch, or in a
 * statement not yet answered, waits for the next one, so calls of one key run in the order they
 * were made and each sees what the one before it wrote, as if they had run one after the other. Keys go in ascending order, so two
 * batches (of two processes) lock the rows they share in the same order and cannot deadlock. When
 * the server refuses a batch's statement (it was rolled back whole), each call runs again on its
 * own and gets exactly its own answer or error; when the outcome is unknown (no answer from the
 * server), every call of the batch fails with that error.
 *
 * @typeParam A - the arguments of one call besides its key
 * @typeParam R - the result of one call
 */
export class StatementBatch<A, R> {
  readonly #statement: BatchedStatement<A, R>;
  readonly #maxSize: number;
  #queue: Waiting<A, R>[] = [];
  #scheduled = false;
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
      this.#queue.push({ item: { key, args }, resolve, reject });
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
    if (this.#scheduled || this.#queue.length === 0) return;
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
    if (members.length === 0) return;
    members.sort((a, b) => compareKeys(a.item.key, b.item.key));
    for (const key of picked) this.#inFlight.add(key);
    this.#statements += 1;
    this.#sizes.set(members.length, (this.#sizes.get(members.length) ?? 0) + 1);
    void this.#send(members).finally(() => {
      for (const key of picked) this.#inFlight.delete(key);
      this.#schedule();
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
      if (!rolledBack(error)) {
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
