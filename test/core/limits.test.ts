import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { heartbeat } from '../../src/core/heartbeat.js';
import { makeIdempotent } from '../../src/function/index.js';
import { idempotent } from '../../src/http/index.js';
import {
  InvalidKeyError,
  InvalidOptionError,
  type LeasedIdempotencyStore,
  MAX_KEY_BYTES,
  MAX_LEASE_SECONDS,
} from '../../src/index.js';
import {
  openSqliteStore,
  type SqliteIdempotencyStore,
  sqliteTransaction,
} from '../../src/sqlite/index.js';
import { countedStore } from '../support/counted-store.js';
import { type StoreFactory, storeFactories } from '../support/store-factories.js';
import { freshDbPath, tempDir } from '../support/temp.js';
import { deferred, until } from '../support/waiting.js';

const factories = storeFactories();
const dir = tempDir('idem-limits-');

let sqlite: SqliteIdempotencyStore;
beforeEach(() => {
  sqlite = openSqliteStore(freshDbPath(dir));
});
afterEach(() => {
  sqlite.close();
});

describe('the clock of makeIdempotent', () => {
  it('refuses a clock in milliseconds, as the HTTP layer does, in both forms', () => {
    const fn = async (_id: string) => 1;
    const key = (id: string) => id;
    expect(() => idempotent(sqlite, { now: Date.now })).toThrow(/looks like milliseconds/);
    expect(() => makeIdempotent(fn, { store: sqlite, key, now: Date.now })).toThrow(
      InvalidOptionError,
    );
    expect(() => makeIdempotent(fn, { store: sqlite, key, now: Date.now })).toThrow(
      /looks like milliseconds/,
    );
    expect(() =>
      makeIdempotent(async (_tx: unknown, _id: string) => 1, {
        transaction: sqliteTransaction(sqlite),
        key,
        now: Date.now,
      }),
    ).toThrow(/looks like milliseconds/);
    expect(() =>
      makeIdempotent(fn, {
        store: sqlite,
        key,
        now: () => {
          throw new Error('no clock');
        },
      }),
    ).toThrow(InvalidOptionError);
    expect(() =>
      makeIdempotent(fn, { store: sqlite, key, now: () => Number.NaN as number }),
    ).toThrow(InvalidOptionError);
    expect(() =>
      makeIdempotent(fn, { store: sqlite, key, now: () => Date.now() / 1000 }),
    ).not.toThrow();
  });
});

describe('the lease of the HTTP layer and makeIdempotent', () => {
  const fn = async (_id: string) => 1;
  const key = (id: string) => id;

  it(`is refused above MAX_LEASE_SECONDS (${MAX_LEASE_SECONDS} s)`, () => {
    // 6,442,451 s is the first lease whose renewal interval (a third of it) overflows a Node timer.
    for (const leaseSeconds of [MAX_LEASE_SECONDS + 1, 6_442_451, 1e12, 0, -1, Number.NaN]) {
      expect(() => idempotent(sqlite, { leaseSeconds })).toThrow(InvalidOptionError);
      expect(() => makeIdempotent(fn, { store: sqlite, key, leaseSeconds })).toThrow(
        InvalidOptionError,
      );
      expect(() =>
        makeIdempotent(async (_tx: unknown, _id: string) => 1, {
          transaction: sqliteTransaction(sqlite),
          key,
          leaseSeconds,
        }),
      ).toThrow(/leaseSeconds must be a number of seconds above 0 and at most 604800/);
    }
    expect(() => idempotent(sqlite, { leaseSeconds: MAX_LEASE_SECONDS })).not.toThrow();
    expect(() =>
      makeIdempotent(fn, { store: sqlite, key, leaseSeconds: MAX_LEASE_SECONDS }),
    ).not.toThrow();
  });

  it('never renews a long lease on every tick: the heartbeat timer stays within what Node can wait', async () => {
    const counted = countedStore<LeasedIdempotencyStore<unknown>>(sqlite);
    const store = counted.store;
    const now = () => Date.now() / 1000;
    const claim = async (id: string, leaseSeconds: number): Promise<number> => {
      const got = await store.acquire(id, 'd', { expires: now() + 3600, now: now(), leaseSeconds });
      if (got.status !== 'acquired') throw new Error(`${id} not acquired: ${got.status}`);
      return got.fencingToken;
    };
    // A lease too long for the option (which refuses it) still reaches the heartbeat safely.
    const tooLong = 10_000_000;
    const beat = async (id: string, leaseSeconds: number) => {
      const attempt = await claim(id, leaseSeconds);
      return heartbeat(
        async () => store.renew(id, 'd', attempt, now() + leaseSeconds),
        leaseSeconds,
      );
    };
    const control = await beat('control', 0.03);
    const long = await beat('long', tooLong);
    // Through the options: the longest lease allowed.
    const gate = deferred();
    const job = makeIdempotent(
      async (_id: string) => {
        await gate.promise;
        return 'ok';
      },
      { store, key: (id) => id, leaseSeconds: MAX_LEASE_SECONDS },
    );
    const running = job('longest');
    await until(async () => (await store.get('longest')) !== null);
    try {
      // The control's lease renews every 10 ms; by its fifth renewal a timer clamped to 1 ms would
      // have renewed the others dozens of times.
      await until(() => counted.callsOn('renew', 'control') >= 5);
    } finally {
      control.stop();
      long.stop();
      gate.resolve();
    }
    expect(await running).toBe('ok');
    expect(counted.callsOn('renew', 'long')).toBe(0);
    expect(counted.callsOn('renew', 'longest')).toBe(0);
  });
});

function describeKeyLimit(factory: StoreFactory): void {
  describe(`the key limit of makeIdempotent: ${factory.name}`, () => {
    let store: LeasedIdempotencyStore<unknown>;
    let close: () => Promise<void>;
    beforeEach(async () => {
      ({ store, close } = await factory.open());
    });
    afterEach(async () => {
      await close();
    });

    it(`runs a key of ${MAX_KEY_BYTES} UTF-8 bytes, and refuses one byte more with InvalidKeyError, running and writing nothing`, async () => {
      let runs = 0;
      const job = makeIdempotent(
        async (id: string) => {
          runs += 1;
          return id.length;
        },
        { store, key: (id) => id },
      );
      const longest = `${'€'.repeat((MAX_KEY_BYTES - 1) / 3)}a`;
      expect(Buffer.byteLength(longest)).toBe(MAX_KEY_BYTES);
      const over = `${longest}b`;
      await expect(job(over)).rejects.toBeInstanceOf(InvalidKeyError);
      await expect(job(over)).rejects.toThrow(`at most ${MAX_KEY_BYTES}`);
      expect(runs).toBe(0);
      expect(await store.counts()).toEqual({ pending: 0, done: 0 });
      expect(await job(longest)).toBe(longest.length);
      expect(await job(longest)).toBe(longest.length);
      expect(runs).toBe(1);
      expect(await store.get(longest)).toMatchObject({ key: longest, status: 'done' });
    });
  });
}

for (const factory of factories) describeKeyLimit(factory);
