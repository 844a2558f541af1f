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
    acquire: (key, fingerprint, options) => store.acquire(key, fingerprint, options),
    renew: (key, fingerprint, attempt, leaseUntil) =>
      store.renew(key, fingerprint, attempt, leaseUntil),
    markUnrecorded: (key, fingerprint, attempt) => store.markUnrecorded(key, fingerprint, attempt),
    pendingKeys: (options) => store.pendingKeys(options),
    releasePending: (key, fingerprint) => store.releasePending(key, fingerprint),
    reserve: (key, fingerprint, expires) => store.reserve(key, fingerprint, expires),
    finish: async () => {
      throw new FinishFailedError();
    },
    fetch: (key, now) => store.fetch(key, now),
    expired: (now, limit) => store.expired(now, limit),
    purge: (now, limit) => store.purge(now, limit),
    counts: () => store.counts(),
    sweepBatch: (now, batchSize) => store.sweepBatch(now, batchSize),
    stats: (now) => store.stats(now),
    release: (key, fingerprint, attempt) => store.release(key, fingerprint, attempt),
    get: (key) => store.get(key),
    close: () => store.close(),
  };
}
