import { InvalidOptionError } from './errors.js';
import { KeyStatus } from './status.js';
import type { LeasedIdempotencyStore, ReleasePendingResult } from './store.js';
import { assertFingerprint, assertKey, assertTime } from './validation.js';

/** Options of {@link releaseStuckKey}. */
export interface ReleaseStuckKeyOptions {
  /** The time the lease is judged at, on the application's clock (seconds by default). */
  readonly now: number;
  /** Only if the row has this fingerprint. */
  readonly fingerprint?: string;
  /**
   * Release even a key whose owner holds a live lease: its work may still be running, so a retry
   * would run it a second time. Default `false`.
   */
  readonly force?: boolean;
}

/**
 * What {@link releaseStuckKey} did: the results of `releasePending`, or `live` when it refused a
 * key whose owner holds a live lease, with that lease.
 */
export type ReleaseStuckKeyResult =
  | { readonly result: ReleasePendingResult }
  | {
      readonly result: 'live';
      /** When the owner's lease ends unless renewed, on the application's clock. */
      readonly leaseUntil: number;
      /** The owner's fencing token. */
      readonly fencingToken: number;
    };

/**
 * Releases a pending key that nobody is working on, as an operator does: a lapsed lease, a key
 * marked unrecorded, or a key reserved without a lease. A key whose owner holds a live lease at
 * `now` is refused (`live`, with the lease and the owner's token) unless `force` is given,
 * because its request may still be running: releasing it would let a retry run the work again
 * while the original still does it. `idem release` runs this.
 *
 * A lapsed lease is released with the fencing token read a moment before, so a retry that takes
 * the key over in between keeps it (the answer is then `live`). A row marked unrecorded or
 * without a lease is never taken over, so it is released whatever its token.
 *
 * @param store - a store with leases, of any dialect
 * @param key - the stored id (scope included, see `storedId`)
 * @throws {@link InvalidKeyError}, {@link InvalidFingerprintError}, {@link InvalidTimeError} or
 * {@link InvalidOptionError} for bad arguments, before anything is read
 */
export async function releaseStuckKey(
  store: Pick<LeasedIdempotencyStore, 'get' | 'release' | 'releasePending'>,
  key: string,
  options: ReleaseStuckKeyOptions,
): Promise<ReleaseStuckKeyResult> {
  assertKey(key);
  if (typeof options !== 'object' || options === null) {
    throw new InvalidOptionError('releaseStuckKey takes { now, fingerprint?, force? }');
  }
  const { now, fingerprint, force = false } = options;
  assertTime(now, 'now');
  if (fingerprint !== undefined) assertFingerprint(fingerprint);
  if (typeof force !== 'boolean') {
    throw new InvalidOptionError(`force must be a boolean, got ${typeof force}`);
  }
  if (force) return { result: await store.releasePending(key, fingerprint) };
  for (;;) {
    const record = await store.get(key);
    if (
      record === null ||
      record.status !== KeyStatus.pending ||
      (fingerprint !== undefined && record.fingerprint !== fingerprint) ||
      record.unrecorded ||
      record.leaseUntil === null
    ) {
      return { result: await store.releasePending(key, fingerprint) };
    }
    if (record.leaseUntil > now) {
      return { result: 'live', leaseUntil: record.leaseUntil, fencingToken: record.fencingToken };
    }
    // Lapsed: fenced on the token just read, so a takeover in between is never released.
    if (await store.release(key, record.fingerprint, record.fencingToken)) {
      return { result: 'released' };
    }
  }
}
