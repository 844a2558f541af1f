// Scenarios a Worker or a Durable Object runs on a store inside workerd, answering what it
// observed as JSON for the test in Node to check. Only types are imported here: the store is the
// one the Worker built from the packed package.
import type { AcquireResult, LeasedIdempotencyStore } from '../../src/index.js';

function nameOf(error: unknown): string {
  return error instanceof Error ? error.name : String(error);
}

/** The attempt of an acquired outcome; `undefined` otherwise. */
export function attemptOf(outcome: AcquireResult<unknown>): number | undefined {
  return outcome.status === 'acquired' ? outcome.fencingToken : undefined;
}

/** An acquire's outcome in one word: a takeover is not a fresh `acquired`. */
export function outcomeOf(outcome: AcquireResult<unknown>): string {
  return outcome.status === 'acquired' && outcome.takenOver ? 'takenOver' : outcome.status;
}

/** The store contract of design §2 on an empty store: reserve, finish, fetch, purge, sweep, counts. */
export async function contractScenario(store: LeasedIdempotencyStore<unknown>) {
  const seen: Record<string, unknown> = {};
  seen.reserveNew = await store.reserve('a', 'd', 5);
  seen.reserveAgain = await store.reserve('a', 'other', 50);
  seen.finishOtherDigest = await store.finish('a', 'other', { r: 0 });
  seen.finish = await store.finish('a', 'd', { receipt: 1, text: 'é\u{1F600}' });
  seen.finishAgain = await store.finish('a', 'd', { r: 2 });
  seen.fetchLive = await store.fetch('a', 4.5);
  seen.fetchAtExpiry = await store.fetch('a', 5);
  seen.fetchMissing = await store.fetch('nope', 0);
  for (const id of ['c', 'b', 'B', 'a2']) {
    await store.reserve(id, 'd', 5);
    await store.finish(id, 'd', { id });
  }
  seen.reservePendingPast = await store.reserve('p', 'd', 1);
  seen.expired = await store.expired(10, 100);
  seen.purgeTwo = await store.purge(10, 2);
  seen.purgeRest = await store.purge(10);
  seen.countsAfterPurge = await store.counts();
  seen.reserveAfterPurge = await store.reserve('a', 'v2', 20);
  for (const [id, expires] of [
    ['s3', 3],
    ['s1', 1],
    ['s2', 2],
  ] as const) {
    await store.reserve(id, 'd', expires);
    await store.finish(id, 'd', null);
  }
  seen.sweepTwo = await store.sweepBatch(10, 2);
  seen.leftAfterSweep = await store.expired(10, 100);
  seen.sweepRest = await store.sweepBatch(10, 10);
  seen.sweepNone = await store.sweepBatch(10, 10);
  seen.counts = await store.counts();
  seen.pendingKept = await store.get('p');
  seen.releaseOther = await store.release('p', 'other');
  seen.release = await store.release('p', 'd');
  seen.releaseAgain = await store.release('p', 'd');
  try {
    await store.purge(10, 0);
    seen.badLimit = 'accepted';
  } catch (error) {
    seen.badLimit = nameOf(error);
  }
  return seen;
}

/** A lapsed lease taken over: a higher fencing token, and the stale owner's finish refused. */
export async function fenceScenario(store: LeasedIdempotencyStore<unknown>, key: string) {
  const first = await store.acquire(key, 'd', { expires: 1000, now: 1, leaseSeconds: 10 });
  const early = await store.acquire(key, 'd', { expires: 1000, now: 5, leaseSeconds: 10 });
  const second = await store.acquire(key, 'd', { expires: 1000, now: 20, leaseSeconds: 10 });
  return {
    first: outcomeOf(first),
    beforeLapse: outcomeOf(early),
    second: outcomeOf(second),
    tokenRaised: (attemptOf(second) ?? 0) > (attemptOf(first) ?? Number.POSITIVE_INFINITY),
    staleFinish: await store.finish(key, 'd', { by: 'first' }, attemptOf(first)),
    staleRelease: await store.release(key, 'd', attemptOf(first)),
    currentFinish: await store.finish(key, 'd', { by: 'second' }, attemptOf(second)),
    currentFinishAgain: await store.finish(key, 'd', { by: 'second' }, attemptOf(second)),
    answer: await store.fetch(key, 30),
    replay: outcomeOf(await store.acquire(key, 'd', { expires: 1000, now: 40, leaseSeconds: 10 })),
  };
}

/** The heartbeat's and the operator's side of leases. */
export async function leaseScenario(store: LeasedIdempotencyStore<unknown>) {
  const lease = { expires: 1000, leaseSeconds: 10 };
  const seen: Record<string, unknown> = {};
  const claim = await store.acquire('l', 'd', { ...lease, now: 1 });
  const token = attemptOf(claim) ?? 0;
  seen.acquired = outcomeOf(claim);
  seen.renew = await store.renew('l', 'd', token, 50);
  seen.renewWrongAttempt = await store.renew('l', 'd', token + 1, 60);
  seen.beforeLapse = outcomeOf(await store.acquire('l', 'd', { ...lease, now: 40 }));
  seen.otherDigest = outcomeOf(await store.acquire('l', 'other', { ...lease, now: 40 }));
  seen.markUnrecorded = await store.markUnrecorded('l', 'd', token);
  seen.stale = (await store.pendingKeys({ now: 40, stale: true })).map((row) => row.key);
  seen.stats = await store.stats(40);
  seen.releasePendingOther = await store.releasePending('l', 'other');
  seen.releasePending = await store.releasePending('l');
  seen.releaseAgain = await store.releasePending('l');
  return seen;
}
