import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { makeIdempotent } from '../../src/function/index.js';
import { idempotent } from '../../src/http/index.js';
import {
  InvalidOptionError,
  type LeasedIdempotencyStore,
  MIN_WAIT_INTERVAL_MS,
} from '../../src/index.js';
import { countedStore } from '../support/counted-store.js';
import { type StoreFactory, storeFactories } from '../support/store-factories.js';
import { deferred, until, type Watched, watched } from '../support/waiting.js';

const factories = storeFactories();

// The store operations that write (each one statement that may take a row lock or change a row).
const WRITES = ['reserve', 'acquire', 'renew', 'finish', 'release', 'markUnrecorded'];

const WAITERS = 20;

// Long enough that the owner's heartbeat (every third of it) never renews during a test: a renewal
// is a write, and after the clock moves past the lease it would make the lease live again.
const LEASE = 600;

const request = {
  method: 'POST',
  path: '/pay',
  headers: { 'idempotency-key': 'k1' },
  body: { amount: 1 },
};

function describeWaiting(factory: StoreFactory): void {
  describe(`waiting duplicates: ${factory.name}`, () => {
    let store: LeasedIdempotencyStore<unknown>;
    let close: () => Promise<void>;
    beforeEach(async () => {
      ({ store, close } = await factory.open());
    });
    afterEach(async () => {
      await close();
    });

    // Holds an owner while WAITERS duplicates wait behind it: they must be seen waiting (reading
    // the row, again and again, none of them answering), make no write in the meantime, and all
    // get the owner's answer once the test releases it.
    async function expectReadOnlyWait(
      counted: ReturnType<typeof countedStore<LeasedIdempotencyStore<unknown>>>,
      waiters: readonly Watched<unknown>[],
      release: () => void,
      settled: () => Promise<unknown[]>,
    ): Promise<void> {
      const writes = () => WRITES.reduce((sum, operation) => sum + counted.calls(operation), 0);
      const answered = () => waiters.some((waiter) => waiter.settled());
      // Every waiter claimed once (one write each, plus the owner's) and the crowd then read the
      // row at least twice per waiter: the wait was entered. Polling with writes shows up as
      // more acquires instead, and stops the wait at once; a duplicate that does not wait answers.
      await until(
        () =>
          (counted.calls('acquire') === WAITERS + 1 && counted.calls('get') >= 2 * WAITERS) ||
          counted.calls('acquire') > 3 * WAITERS ||
          answered(),
      );
      expect(answered()).toBe(false);
      expect(counted.calls('acquire')).toBe(WAITERS + 1);
      const before = writes();
      const reads = counted.calls('get');
      await until(
        () => counted.calls('get') >= reads + 2 * WAITERS || writes() > before || answered(),
      );
      expect(writes()).toBe(before);
      // Still in the wait: no duplicate answers before the owner is released.
      expect(answered()).toBe(false);
      release();
      await settled();
      // The owner's finish is the only write after the claims: the waiters replay from a read.
      expect(writes()).toBe(before + 1);
    }

    it('makeIdempotent: waiters read the row without writing until the owner finishes, then replay', async () => {
      const counted = countedStore(store);
      const gate = deferred<string>();
      let runs = 0;
      const job = makeIdempotent(
        (_id: string) => {
          runs += 1;
          return gate.promise;
        },
        {
          store: counted.store,
          key: (id) => id,
          leaseSeconds: LEASE,
          wait: { timeoutMs: 120_000, intervalMs: 10 },
        },
      );
      const owner = job('k');
      await until(() => runs === 1);
      const waiters = Array.from({ length: WAITERS }, () => watched(job('k')));
      await expectReadOnlyWait(
        counted,
        waiters,
        () => gate.resolve('result'),
        async () => {
          expect(await Promise.all([owner, ...waiters.map((waiter) => waiter.promise)])).toEqual(
            Array.from({ length: WAITERS + 1 }, () => 'result'),
          );
          return [];
        },
      );
      expect(runs).toBe(1);
    });

    it('HTTP layer: waiters read the row without writing until the owner finishes, then replay', async () => {
      const counted = countedStore(store);
      const gate = deferred();
      let runs = 0;
      const layer = idempotent(counted.store, {
        leaseSeconds: LEASE,
        wait: { timeoutMs: 120_000, intervalMs: 10 },
      });
      const handler = async () => {
        runs += 1;
        await gate.promise;
        return { status: 201, body: { paid: true } };
      };
      const owner = layer.handle(request, handler);
      await until(() => runs === 1);
      const waiters = Array.from({ length: WAITERS }, () =>
        watched(layer.handle(request, handler)),
      );
      await expectReadOnlyWait(
        counted,
        waiters,
        () => gate.resolve(),
        async () => {
          const results = await Promise.all(waiters.map((waiter) => waiter.promise));
          expect((await owner).outcome).toBe('executed');
          expect(results.map((result) => result.outcome)).toEqual(
            Array.from({ length: WAITERS }, () => 'replayed'),
          );
          return results;
        },
      );
      expect(runs).toBe(1);
    });

    it('a waiter claims the key once the owner lease lapsed, and runs', async () => {
      const counted = countedStore(store as LeasedIdempotencyStore<unknown>);
      let clock = 1_000;
      const frozen = deferred<string>();
      let runs = 0;
      const job = makeIdempotent(
        (_id: string) => {
          runs += 1;
          return runs === 1 ? frozen.promise : Promise.resolve('second');
        },
        {
          store: counted.store,
          key: (id) => id,
          leaseSeconds: LEASE,
          now: () => clock,
          wait: { timeoutMs: 120_000, intervalMs: 10 },
        },
      );
      const owner = job('k').catch((error: unknown) => error);
      await until(() => runs === 1);
      const waiter = watched(job('k'));
      // Reading the row again and again without answering: the waiter is in the wait.
      await until(() => counted.calls('get') >= 3 || waiter.settled());
      expect(waiter.settled()).toBe(false);
      expect(counted.calls('acquire')).toBe(2);
      expect(runs).toBe(1);
      clock = 1_000 + LEASE + 1;
      expect(await waiter.promise).toBe('second');
      expect(runs).toBe(2);
      // The waiter claimed once more, after the lapse: its first claim and the takeover.
      expect(counted.calls('acquire')).toBe(3);
      frozen.resolve('late');
      await owner;
    });
  });
}

for (const factory of factories) describeWaiting(factory);

describe('the poll interval of a wait', () => {
  it(`is refused below ${MIN_WAIT_INTERVAL_MS} ms by the HTTP layer and makeIdempotent`, async () => {
    const [sqlite] = factories;
    if (sqlite === undefined) throw new Error('no store factory');
    const { store, close } = await sqlite.open();
    try {
      for (const intervalMs of [0, 1, MIN_WAIT_INTERVAL_MS - 1]) {
        const wait = { timeoutMs: 1_000, intervalMs };
        expect(() => idempotent(store, { wait })).toThrow(InvalidOptionError);
        expect(() => makeIdempotent(async () => 1, { store, key: () => 'k', wait })).toThrow(
          /wait\.intervalMs must be an integer from 10/,
        );
      }
      const wait = { timeoutMs: 1_000, intervalMs: MIN_WAIT_INTERVAL_MS };
      expect(() => idempotent(store, { wait })).not.toThrow();
      expect(() => makeIdempotent(async () => 1, { store, key: () => 'k', wait })).not.toThrow();
    } finally {
      await close();
    }
  });
});
