// The reference model of the store, written from the contract (docs/store.md), not from any
// implementation: a map of rows and the rules of each operation, kept as plain as possible so
// that a disagreement points at the store.
import type { RawRow } from '../contract/harness.js';

/** A row of the model: the same columns, the response kept as the JSON text stored. */
export interface ModelRow {
  fingerprint: string;
  status: 'pending' | 'done';
  response: string | null;
  expires: number;
  leaseUntil: number | null;
  /** The fencing token of the row's ownership; 1 on a row made by `reserve`. */
  fencingToken: number;
  unrecorded: boolean;
}

/** What `acquire` answers, with a record reduced to the fields the model keeps. */
export type ModelAcquire =
  | { status: 'acquired'; fencingToken: number; leaseUntil: number; takenOver: boolean }
  | { status: 'done' | 'mismatch'; record: ModelRow & { key: string } }
  | { status: 'inProgress'; fencingToken: number; leaseUntil: number | null; unrecorded: boolean };

/** Ids compared as the contract orders them: by their UTF-8 bytes. */
export function byteOrder(a: string, b: string): number {
  return Buffer.compare(Buffer.from(a, 'utf8'), Buffer.from(b, 'utf8'));
}

/**
 * The in-memory reference store. Every method mirrors one operation of the contract.
 *
 * Fencing tokens are drawn from the real clock, so the model cannot predict them: `acquire` takes
 * the token the store handed out and the model keeps every token each key was ever given, across
 * its deletions. The contract's rule is then checked on them (see
 * {@link ReferenceModel.tokenRule}), and every fenced write is judged by comparing its token with
 * the row's, so a stale owner's write (a takeover's or a release's and a new claim's since) is
 * refused.
 */
export class ReferenceModel {
  readonly rows = new Map<string, ModelRow>();
  readonly #tokens = new Map<string, number[]>();

  /** Every token `acquire` gave `key`, oldest first, whatever happened to the key since. */
  tokens(key: string): readonly number[] {
    return this.#tokens.get(key) ?? [];
  }

  /**
   * Why `token` breaks the rule for the next ownership of `key`, or `undefined` when it keeps it: a
   * safe integer no earlier ownership of the key held, and above the row's token where a row is
   * taken over. After a release or a purge nothing of the key's past is left, so a fresh token is
   * only distinct (random), not greater.
   */
  tokenRule(key: string, token: number): string | undefined {
    if (!Number.isSafeInteger(token) || token < 2)
      return `token ${token} is not a safe integer above 1`;
    if (this.tokens(key).includes(token)) return `token ${token} was issued before`;
    const row = this.rows.get(key);
    if (row !== undefined && token <= row.fencingToken)
      return `token ${token} is not above the row's ${row.fencingToken}`;
    return undefined;
  }

  reserve(key: string, fingerprint: string, expires: number): boolean {
    if (this.rows.has(key)) return false;
    this.rows.set(key, {
      fingerprint: fingerprint,
      status: 'pending',
      response: null,
      expires,
      leaseUntil: null,
      fencingToken: 1,
      unrecorded: false,
    });
    return true;
  }

  /**
   * Insert, take over a lapsed lease of the same fingerprint, or report what is there. `token` is
   * the fencing token the store handed out when it acquired (`undefined` when it did not, which
   * then shows as `NaN` against an acquired answer).
   */
  acquire(
    key: string,
    fingerprint: string,
    expires: number,
    now: number,
    lease: number,
    token: number | undefined,
  ): ModelAcquire {
    const leaseUntil = now + lease;
    const row = this.rows.get(key);
    const issue = (): number => {
      const issued = token ?? Number.NaN;
      this.#tokens.set(key, [...this.tokens(key), issued]);
      return issued;
    };
    if (row === undefined) {
      const fencingToken = issue();
      this.rows.set(key, {
        fingerprint: fingerprint,
        status: 'pending',
        response: null,
        expires,
        leaseUntil,
        fencingToken,
        unrecorded: false,
      });
      return { status: 'acquired', fencingToken, leaseUntil, takenOver: false };
    }
    if (row.fingerprint !== fingerprint) return { status: 'mismatch', record: { key, ...row } };
    if (row.status === 'done') return { status: 'done', record: { key, ...row } };
    if (!row.unrecorded && row.leaseUntil !== null && row.leaseUntil <= now) {
      row.fencingToken = issue();
      row.leaseUntil = leaseUntil;
      row.expires = expires;
      return { status: 'acquired', fencingToken: row.fencingToken, leaseUntil, takenOver: true };
    }
    const { fencingToken, unrecorded } = row;
    return { status: 'inProgress', fencingToken, leaseUntil: row.leaseUntil, unrecorded };
  }

  // The pending row `fencingToken` owns (any fencingToken when none is given, as the token-less calls).
  #owned(key: string, fingerprint: string, fencingToken?: number): ModelRow | undefined {
    const row = this.rows.get(key);
    if (row?.status !== 'pending' || row.fingerprint !== fingerprint) return undefined;
    return fencingToken === undefined || row.fencingToken === fencingToken ? row : undefined;
  }

  /**
   * What a transactional runner's fenced UPDATE does: only the owner's pending row takes the
   * answer. Never more: a handler that ran again must not commit beside an answer already there.
   */
  record(key: string, fingerprint: string, responseText: string, fencingToken?: number): boolean {
    const row = this.#owned(key, fingerprint, fencingToken);
    if (row === undefined) return false;
    row.status = 'done';
    row.response = responseText;
    return true;
  }

  finish(key: string, fingerprint: string, responseText: string, fencingToken?: number): boolean {
    if (this.record(key, fingerprint, responseText, fencingToken)) return true;
    // A fenced finish repeated after it landed: the owner's own answer is there, so it is told so.
    const done = this.rows.get(key);
    return (
      fencingToken !== undefined &&
      done?.status === 'done' &&
      done.fingerprint === fingerprint &&
      done.fencingToken === fencingToken &&
      done.response === responseText
    );
  }

  renew(key: string, fingerprint: string, fencingToken: number, leaseUntil: number): boolean {
    const row = this.#owned(key, fingerprint, fencingToken);
    if (row === undefined || row.unrecorded) return false;
    row.leaseUntil = leaseUntil;
    return true;
  }

  markUnrecorded(key: string, fingerprint: string, fencingToken: number): boolean {
    const row = this.#owned(key, fingerprint, fencingToken);
    if (row === undefined) return false;
    row.unrecorded = true;
    row.leaseUntil = null;
    return true;
  }

  releasePending(key: string, fingerprint?: string): string {
    const row = this.rows.get(key);
    if (row === undefined) return 'missing';
    if (row.status === 'done') return 'done';
    if (fingerprint !== undefined && row.fingerprint !== fingerprint) return 'mismatch';
    this.rows.delete(key);
    return 'released';
  }

  pendingKeys(now: number, stale: boolean, limit: number) {
    return [...this.rows]
      .filter(([, row]) => row.status === 'pending')
      .map(([key, row]) => {
        const state = row.unrecorded
          ? 'unrecorded'
          : row.leaseUntil === null
            ? 'unleased'
            : row.leaseUntil <= now
              ? 'lapsed'
              : 'live';
        const { fingerprint, expires, leaseUntil, fencingToken } = row;
        return { key, fingerprint, expires, leaseUntil, fencingToken, state };
      })
      .filter(
        (row) =>
          !stale ||
          row.state === 'lapsed' ||
          row.state === 'unrecorded' ||
          (row.state === 'unleased' && row.expires <= now),
      )
      .sort((a, b) => byteOrder(a.key, b.key))
      .slice(0, limit);
  }

  /** The stored JSON text a fetch replays, or null. */
  fetch(key: string, now: number): string | null {
    const row = this.rows.get(key);
    return row?.status === 'done' && row.expires > now ? row.response : null;
  }

  expired(now: number, limit: number): string[] {
    return [...this.rows]
      .filter(([, row]) => row.status === 'done' && row.expires <= now)
      .map(([id]) => id)
      .sort(byteOrder)
      .slice(0, limit);
  }

  purge(now: number, limit: number): string[] {
    const ids = this.expired(now, limit);
    for (const id of ids) this.rows.delete(id);
    return ids;
  }

  /** Deletes up to `batchSize` expired answers in `(expires, id)` order; returns how many. */
  sweepBatch(now: number, batchSize: number): number {
    const victims = [...this.rows]
      .filter(([, row]) => row.status === 'done' && row.expires <= now)
      .sort(([a, x], [b, y]) => x.expires - y.expires || byteOrder(a, b))
      .slice(0, batchSize);
    for (const [id] of victims) this.rows.delete(id);
    return victims.length;
  }

  /**
   * The batched sweep as documented: batches of `batchSize` in `(expires, id)` order until one
   * comes back short, or `maxBatches` full ones; with `dryRun`, only what it would delete.
   */
  sweep(now: number, batchSize: number, maxBatches: number | undefined, dryRun: boolean) {
    const backlog = this.stats(now).expired;
    const cap = maxBatches === undefined ? backlog : Math.min(backlog, maxBatches * batchSize);
    if (dryRun) {
      return {
        deleted: 0,
        batches: 0,
        remaining: backlog,
        backlog,
        stoppedBy: 'dryRun',
        wouldDelete: cap,
      };
    }
    const deleted = this.sweepBatch(now, cap);
    const full = maxBatches !== undefined && backlog >= maxBatches * batchSize;
    return {
      deleted,
      batches: Math.ceil(deleted / batchSize),
      remaining: backlog - deleted,
      backlog,
      stoppedBy: full ? 'maxBatches' : 'drained',
      wouldDelete: 0,
    };
  }

  counts(): { pending: number; done: number } {
    let pending = 0;
    for (const row of this.rows.values()) if (row.status === 'pending') pending++;
    return { pending, done: this.rows.size - pending };
  }

  stats(now: number) {
    let expired = 0;
    let stalePending = 0;
    let lapsed = 0;
    let unrecorded = 0;
    for (const row of this.rows.values()) {
      if (row.status === 'pending') {
        if (row.unrecorded) unrecorded++;
        else if (row.leaseUntil !== null && row.leaseUntil <= now) lapsed++;
      }
      if (row.expires > now) continue;
      if (row.status === 'done') expired++;
      else stalePending++;
    }
    return { ...this.counts(), expired, stalePending, lapsed, unrecorded };
  }

  /** Without `fencingToken`, the 0.1.0 release; with it, only the owner of that fencingToken, not unrecorded. */
  release(key: string, fingerprint: string, fencingToken?: number): boolean {
    const row = this.#owned(key, fingerprint, fencingToken);
    if (row === undefined || (fencingToken !== undefined && row.unrecorded)) return false;
    this.rows.delete(key);
    return true;
  }

  get(key: string): (ModelRow & { key: string }) | null {
    const row = this.rows.get(key);
    return row ? { key, ...row } : null;
  }

  /** The whole table as raw rows (the contract's five columns), in byte order of id. */
  table(): RawRow[] {
    return [...this.rows]
      .sort(([a], [b]) => byteOrder(a, b))
      .map(([id, row]) => ({
        id,
        fingerprint: row.fingerprint,
        status: row.status,
        response: row.response,
        expires: row.expires,
      }));
  }
}
