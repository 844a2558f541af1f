import { expect } from 'vitest';
import type { LeasedIdempotencyStore } from '../../src/core/store.js';
import { idempotent } from '../../src/http/index.js';

/** The fingerprint the replay tests claim their keys with. */
export const REPLAY_DIGEST = 'd'.repeat(64);

const lease = { expires: 100, now: 3, leaseSeconds: 30 };

/** Claims and finishes `key` on `store`, so that every later `acquire` of it is a replay. */
export async function finishedKey(
  store: LeasedIdempotencyStore<unknown>,
  key: string,
): Promise<void> {
  const claim = await store.acquire(key, REPLAY_DIGEST, { ...lease, now: 1 });
  if (claim.status !== 'acquired') throw new Error(`unexpected ${claim.status}`);
  expect(await store.finish(key, REPLAY_DIGEST, { paid: true }, claim.fencingToken)).toBe(true);
}

/** `acquire`s the finished `key` `times` times with its own and with another fingerprint. */
export async function storeReplays(
  store: LeasedIdempotencyStore<unknown>,
  key: string,
  times = 20,
): Promise<void> {
  for (let n = 0; n < times; n += 1) {
    expect((await store.acquire(key, REPLAY_DIGEST, lease)).status).toBe('done');
    expect((await store.acquire(key, 'e'.repeat(64), lease)).status).toBe('mismatch');
  }
}

/** One request through the HTTP layer over `store`, and its replays. */
export function httpReplays(store: LeasedIdempotencyStore<unknown>, key: string) {
  const layer = idempotent(store, { now: () => 5 });
  const request = (id: string) => ({
    method: 'POST',
    path: '/pay',
    headers: { 'idempotency-key': id },
    body: { amount: 1 },
  });
  const handler = async () => ({ status: 201, body: { paid: true } });
  return {
    /** Runs the handler once: the key's answer is stored. */
    async first(): Promise<void> {
      expect((await layer.handle(request(key), handler)).outcome).toBe('executed');
    },
    /** Sends the same request `times` times; each must be replayed. */
    async replays(times = 20): Promise<void> {
      for (let n = 0; n < times; n += 1) {
        expect((await layer.handle(request(key), handler)).outcome).toBe('replayed');
      }
    },
    /** A request under a key of its own, which runs the handler: a write. */
    fresh: (id: string) => layer.handle(request(id), handler),
  };
}
