import type { LeasedIdempotencyStore } from '../../src/index.js';

/** A row of the `keys` table exactly as stored (response as JSON text). */
export interface RawRow {
  id: string;
  fingerprint: string;
  status: string;
  response: string | null;
  expires: number;
}

/** A fresh, empty store and a way to read its table directly. */
export interface StoreHarness {
  store: LeasedIdempotencyStore;
  /** Every row, ordered by id, read without going through the store. */
  rows(): Promise<RawRow[]>;
  /** Inserts rows directly, bypassing the store (to build states quickly). */
  seed(rows: RawRow[]): Promise<void>;
  close(): Promise<void>;
}

/** Builds a fresh harness for each test. */
export type HarnessFactory = () => Promise<StoreHarness>;
