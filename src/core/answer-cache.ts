/**
 * An in-process, bounded (least recently used) cache of stored answers, so replays of hot keys
 * skip the database. It is exact, not a guess, because of how a `done` row can change:
 *
 * ```
 *  finish ──▶ done(response, expires) ─── nothing through the store API changes it ───▶ deleted
 *                                          (finish and release only touch pending rows;     by retention
 *                                           reserve never overwrites)                       at now >= expires
 * ```
 *
 * So an answer read once stays the answer while `now < expires`, and the cache never serves it at
 * or after `expires`. Two more rules close the gaps a single process can see: an answer is
 * remembered only when read outside any transaction (so it was committed), and once this store
 * has purged or swept at some `now`, entries expiring at or before it are no longer served. What
 * it cannot see: another process purging with a clock running ahead of this one's (this process
 * then replays the answer until its own clock reaches `expires`, as the row promised), and writes
 * that bypass the store with plain SQL.
 */
export class AnswerCache {
  readonly #capacity: number;
  // A Map iterates in insertion order; re-inserting on every hit keeps the least recently used
  // first.
  readonly #entries = new Map<string, { readonly text: string; readonly expires: number }>();
  #horizon = Number.NEGATIVE_INFINITY;

  /** @param capacity - the most answers kept; 0 keeps none */
  constructor(capacity: number) {
    this.#capacity = capacity;
  }

  /** The stored JSON text of `key`'s answer if it may be replayed at `now`, else `undefined`. */
  get(key: string, now: number): string | undefined {
    const entry = this.#entries.get(key);
    if (entry === undefined) return undefined;
    this.#entries.delete(key);
    if (now >= entry.expires || entry.expires <= this.#horizon) return undefined;
    this.#entries.set(key, entry);
    return entry.text;
  }

  /** Keeps a committed `done` answer, evicting the least recently used one when full. */
  remember(key: string, text: string, expires: number): void {
    if (this.#capacity === 0 || expires <= this.#horizon) return;
    this.#entries.delete(key);
    this.#entries.set(key, { text, expires });
    if (this.#entries.size > this.#capacity) {
      const oldest = this.#entries.keys().next();
      if (!oldest.done) this.#entries.delete(oldest.value);
    }
  }

  /** Drops `key`: its row was found absent, so whatever was cached for it is gone. */
  forget(key: string): void {
    this.#entries.delete(key);
  }

  /** Records that retention ran at `now`: answers expiring at or before it may be deleted. */
  retire(now: number): void {
    if (now > this.#horizon) this.#horizon = now;
  }

  /** The number of answers held. */
  get size(): number {
    return this.#entries.size;
  }

  /** Drops every entry. */
  clear(): void {
    this.#entries.clear();
  }
}
