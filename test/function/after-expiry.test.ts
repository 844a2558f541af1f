import { describe, expect, it } from 'vitest';
import { makeIdempotent, ResultExpiredError } from '../../src/function/index.js';
import { InvalidOptionError, type LeasedIdempotencyStore } from '../../src/index.js';
import { storeFactories } from '../support/store-factories.js';

const TTL = 10;

const factories = storeFactories('behaviour');

describe.each(factories)('afterExpiry on $name', (factory) => {
  function charging(
    store: LeasedIdempotencyStore,
    clock: { now: number },
    afterExpiry?: 'new-request',
  ) {
    let runs = 0;
    const charge = makeIdempotent(
      async (order: string) => {
        runs++;
        return { order, charge: runs };
      },
      { store, key: (order) => order, ttlSeconds: TTL, now: () => clock.now, afterExpiry },
    );
    return { charge, runs: () => runs };
  }

  it('refuses an expired, unswept result by default, saying when the key becomes new', async () => {
    const { store, close } = await factory.open();
    try {
      const clock = { now: 1_000 };
      const { charge, runs } = charging(store as LeasedIdempotencyStore, clock);
      await charge('o-1');
      clock.now += TTL;
      const error = await charge('o-1').catch((caught: unknown) => caught);
      expect(error).toBeInstanceOf(ResultExpiredError);
      expect((error as Error).message).toContain('until the next sweep deletes it');
      expect((error as Error).message).toContain("afterExpiry: 'new-request'");
      expect(runs()).toBe(1);
    } finally {
      await close();
    }
  });

  it("'new-request' runs an expired call again at once, and replays the new result", async () => {
    const { store, close } = await factory.open();
    try {
      const clock = { now: 1_000 };
      const { charge, runs } = charging(store as LeasedIdempotencyStore, clock, 'new-request');
      expect(await charge('o-1')).toEqual({ order: 'o-1', charge: 1 });
      clock.now += TTL;
      expect(await charge('o-1')).toEqual({ order: 'o-1', charge: 2 });
      expect(await charge('o-1')).toEqual({ order: 'o-1', charge: 2 });
      const record = await store.get('o-1');
      expect(record).toMatchObject({ status: 'done', expires: clock.now + TTL, unrecorded: false });
      expect(runs()).toBe(2);
    } finally {
      await close();
    }
  });

  it("'new-request': of concurrent claims on an expired row one wins, beside a sweep", async () => {
    const { store, close } = await factory.open();
    const leased = store as LeasedIdempotencyStore;
    try {
      const clock = { now: 1_000 };
      for (let round = 0; round < 5; round++) {
        const key = `race-${round}`;
        await leased.reserve(key, 'fp', clock.now + TTL - 1);
        await leased.finish(key, 'fp', { old: true });
      }
      clock.now += TTL;
      const claims = Array.from({ length: 5 }, (_, round) =>
        Array.from({ length: 6 }, () =>
          leased.acquire(`race-${round}`, 'new', {
            now: clock.now,
            expires: clock.now + TTL,
            leaseSeconds: 30,
            replaceExpired: true,
          }),
        ),
      ).flat();
      // A sweep runs among them: it deletes a row first (the claims then insert) or finds it
      // replaced, pending, and leaves it.
      const [results] = await Promise.all([
        Promise.all(claims),
        Promise.resolve(leased.sweepBatch(clock.now, 2)),
      ]);
      for (let round = 0; round < 5; round++) {
        const mine = results.slice(round * 6, round * 6 + 6);
        const won = mine.filter((result) => result.status === 'acquired');
        expect(won).toHaveLength(1);
        expect(mine.filter((result) => result.status !== 'acquired')).toEqual(
          Array(5).fill(expect.objectContaining({ status: 'inProgress' })),
        );
        const record = await leased.get(`race-${round}`);
        expect(record).toMatchObject({ status: 'pending', fingerprint: 'new', response: null });
        expect(record?.fencingToken).toBe(won[0]?.status === 'acquired' ? won[0].fencingToken : -1);
      }
    } finally {
      await close();
    }
  });

  it('a replaced row fences the old token out, and a live answer is never replaced', async () => {
    const { store, close } = await factory.open();
    const leased = store as LeasedIdempotencyStore;
    try {
      const first = await leased.acquire('k', 'fp', { now: 100, expires: 110, leaseSeconds: 5 });
      if (first.status !== 'acquired') throw new Error('not acquired');
      await leased.finish('k', 'fp', { n: 1 }, first.fencingToken);
      const live = await leased.acquire('k', 'fp', {
        now: 105,
        expires: 200,
        leaseSeconds: 5,
        replaceExpired: true,
      });
      expect(live.status).toBe('done');
      const again = await leased.acquire('k', 'other', {
        now: 110,
        expires: 200,
        leaseSeconds: 5,
        replaceExpired: true,
      });
      if (again.status !== 'acquired') throw new Error(`not acquired: ${again.status}`);
      expect(again.fencingToken).toBeGreaterThan(first.fencingToken);
      expect(again.takenOver).toBe(false);
      expect(await leased.finish('k', 'fp', { n: 'late' }, first.fencingToken)).toBe(false);
      expect(await leased.finish('k', 'other', { n: 2 }, again.fencingToken)).toBe(true);
    } finally {
      await close();
    }
  });
});

describe('afterExpiry option', () => {
  it('refuses anything but refuse or new-request', async () => {
    const [factory] = factories;
    if (factory === undefined) throw new Error('no store factory');
    const { store, close } = await factory.open();
    expect(() =>
      makeIdempotent(async () => 1, {
        store,
        key: () => 'k',
        afterExpiry: 'now' as never,
      }),
    ).toThrow(InvalidOptionError);
    await close();
  });
});
