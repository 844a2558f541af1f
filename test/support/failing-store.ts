import type { LeasedIdempotencyStore } from '../../src/index.js';

/** What the `finish` of {@link failingFinish} throws: the database went away mid-request. */
export class FinishFailedError extends Error {
  constructor() {
    super('the connection to the database was lost while the answer was being recorded');
    this.name = 'FinishFailedError';
  }
}

/**
 * `store` in every way but `finish`, which fails after the handler ran, as when the database goes
 * away between the effect and the record of its answer. Every other call reaches the real store,
 * so what the failure leaves behind can be read back and retried there.
 */
export function failingFinish<T>(store: LeasedIdempotencyStore<T>): LeasedIdempotencyStore<T> {
  return {
    acquire: (key, digest, options) => store.acquire(key, digest, options),
    renew: (key, digest, attempt, leaseUntil) => store.renew(key, digest, attempt, leaseUntil),
    markUnrecorded: (key, digest, attempt) => store.markUnrecorded(key, digest, attempt),
    pendingKeys: (options) => store.pendingKeys(options),
    releasePending: (key, fingerprint) => store.releasePending(key, fingerprint),
    reserve: (key, digest, expires) => store.reserve(key, digest, expires),
    finish: async () => {
      throw new FinishFailedError();
    },
    fetch: (key, now) => store.fetch(key, now),
    expired: (now, limit) => store.expired(now, limit),
    purge: (now, limit) => store.purge(now, limit),
    counts: () => store.counts(),
    sweepBatch: (now, batchSize) => store.sweepBatch(now, batchSize),
    stats: (now) => store.stats(now),
    release: (key, digest, attempt) => store.release(key, digest, attempt),
    get: (key) => store.get(key),
    close: () => store.close(),
  };
}
