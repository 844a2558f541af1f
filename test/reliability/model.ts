// The reference model of the store, written from the contract (design §2), not from any
// implementation: a map of rows and the rules of each operation, kept as plain as possible so
// that a disagreement points at the store.
import type { RawRow } from '../contract/harness.js';

/** A row of the model: the same five columns, the response kept as the JSON text stored. */
export interface ModelRow {
  fingerprint: string;
  status: 'pending' | 'done';
  response: string | null;
  expires: number;
}

/** Ids compared as the contract orders them: by their UTF-8 bytes. */
export function byteOrder(a: string, b: string): number {
  return Buffer.compare(Buffer.from(a, 'utf8'), Buffer.from(b, 'utf8'));
}

/** The in-memory reference store. Every method mirrors one operation of the contract. */
export class ReferenceModel {
  readonly rows = new Map<string, ModelRow>();

  reserve(key: string, digest: string, expires: number): boolean {
    if (this.rows.has(key)) return false;
    this.rows.set(key, { fingerprint: digest, status: 'pending', response: null, expires });
    return true;
  }

  finish(key: string, digest: string, responseText: string): boolean {
    const row = this.rows.get(key);
    if (row?.status !== 'pending' || row.fingerprint !== digest) return false;
    row.status = 'done';
    row.response = responseText;
    return true;
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
    for (const row of this.rows.values()) {
      if (row.expires > now) continue;
      if (row.status === 'done') expired++;
      else stalePending++;
    }
    return { ...this.counts(), expired, stalePending };
  }

  release(key: string, digest: string): boolean {
    const row = this.rows.get(key);
    if (row?.status !== 'pending' || row.fingerprint !== digest) return false;
    this.rows.delete(key);
    return true;
  }

  get(key: string): (ModelRow & { key: string }) | null {
    const row = this.rows.get(key);
    return row ? { key, ...row } : null;
  }

  /** The whole table as raw rows, in byte order of id. */
  table(): RawRow[] {
    return [...this.rows].sort(([a], [b]) => byteOrder(a, b)).map(([id, row]) => ({ id, ...row }));
  }
}
