import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import {
  CallInProgressError,
  CallOutcomeUnknownError,
  KeyReusedError,
  makeIdempotent,
  ResultExpiredError,
  ResultNotRecordedError,
  ResultNotStorableError,
} from '../../src/function/index.js';
import {
  InvalidKeyError,
  InvalidOptionError,
  type LeasedIdempotencyStore,
} from '../../src/index.js';
import { openLibsqlStore } from '../../src/libsql/index.js';
import { countedStore } from '../support/counted-store.js';
import { FinishFailedError, failingFinish } from '../support/failing-store.js';
import { type StoreFactory, storeFactories } from '../support/store-factories.js';
import { freshDbPath, tempDir } from '../support/temp.js';
import { deferred, until, watched } from '../support/waiting.js';

interface Order {
  readonly id: string;
  readonly amount: number;
  readonly attempt?: number;
}

const dir = tempDir('idem-fn-');
const factories: StoreFactory[] = [
  ...storeFactories(),
  {
    name: 'libSQL file',
    open: async () => {
      const store = await openLibsqlStore(`file:${freshDbPath(dir)}`);
      return { store, close: async () => store.close() };
    },
  },
];

describe.each(factories)('makeIdempotent on $name', (factory) => {
  let store: LeasedIdempotencyStore<unknown>;
  let close: () => Promise<void>;

  beforeEach(async () => {
    ({ store, close } = await factory.open());
  });
  afterEach(async () => {
    await close();
  });

  it('runs once and replays the stored result to later calls', async () => {
    let runs = 0;
    const charge = makeIdempotent(
      async (order: Order) => {
        runs += 1;
        return { charged: order.amount, run: runs };
      },
      { store, key: (order) => `charge:${order.id}` },
    );
    expect(await charge({ id: 'o1', amount: 5 })).toEqual({ charged: 5, run: 1 });
    expect(await charge({ id: 'o1', amount: 5 })).toEqual({ charged: 5, run: 1 });
    expect(await charge({ id: 'o2', amount: 7 })).toEqual({ charged: 7, run: 2 });
    expect(runs).toBe(2);
    expect((await store.get('charge:o1'))?.status).toBe('done');
  });

  it('replays a function without a result as undefined', async () => {
    let runs = 0;
    const job = makeIdempotent(
      async (_day: string) => {
        runs += 1;
      },
      { store, key: (day) => `nightly:${day}` },
    );
    expect(await job('2026-11-30')).toBeUndefined();
    expect(await job('2026-11-30')).toBeUndefined();
    expect(runs).toBe(1);
  });

  it('refuses the key with a different payload and runs nothing', async () => {
    let runs = 0;
    const charge = makeIdempotent(
      async (order: Order) => {
        runs += 1;
        return order.amount;
      },
      { store, key: (order) => order.id },
    );
    await charge({ id: 'o1', amount: 5 });
    const error = await charge({ id: 'o1', amount: 6 }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(KeyReusedError);
    expect((error as KeyReusedError).code).toBe('IDEMPOTENCY_KEY_REUSED');
    expect((error as KeyReusedError).record.status).toBe('done');
    expect(runs).toBe(1);
  });

  it('fingerprints only the chosen payload, in canonical JSON', async () => {
    let runs = 0;
    const charge = makeIdempotent(
      async (order: Order) => {
        runs += 1;
        return order.amount;
      },
      {
        store,
        key: (order) => order.id,
        payload: (order) => ({ amount: order.amount, id: order.id }),
      },
    );
    expect(await charge({ id: 'o1', amount: 5, attempt: 1 })).toBe(5);
    expect(await charge({ attempt: 2, amount: 5, id: 'o1' })).toBe(5);
    expect(runs).toBe(1);
  });

  it('releases the key when the function throws, so the next call runs', async () => {
    let runs = 0;
    const flaky = makeIdempotent(
      async (id: string) => {
        runs += 1;
        if (runs === 1) throw new Error('provider down');
        return `ok:${id}`;
      },
      { store, key: (id) => id },
    );
    await expect(flaky('k')).rejects.toThrow('provider down');
    expect(await store.get('k')).toBeNull();
    expect(await flaky('k')).toBe('ok:k');
    expect(await flaky('k')).toBe('ok:k');
    expect(runs).toBe(2);
  });

  it('throws CallInProgressError to a duplicate while the first call runs', async () => {
    const gate = deferred<string>();
    let runs = 0;
    const slow = makeIdempotent(
      (_id: string) => {
        runs += 1;
        return gate.promise;
      },
      { store, key: (id) => id },
    );
    const first = slow('k');
    await until(() => runs === 1);
    const error = await slow('k').catch((e: unknown) => e);
    expect(error).toBeInstanceOf(CallInProgressError);
    expect((error as CallInProgressError).key).toBe('k');
    expect((error as CallInProgressError).code).toBe('IDEMPOTENCY_REQUEST_IN_PROGRESS');
    gate.resolve('done');
    expect(await first).toBe('done');
    expect(await slow('k')).toBe('done');
    expect(runs).toBe(1);
  });

  it('lets a duplicate wait for the first call and return its result', async () => {
    const counted = countedStore(store);
    const gate = deferred<string>();
    let runs = 0;
    const slow = makeIdempotent(
      (_id: string) => {
        runs += 1;
        return gate.promise;
      },
      { store: counted.store, key: (id) => id, wait: { timeoutMs: 60_000, intervalMs: 10 } },
    );
    const first = slow('k');
    await until(() => runs === 1);
    const second = watched(slow('k'));
    // The second call reads the row again and again without answering: it is waiting, not
    // replaying a finished call, and its result comes only once the first is released.
    await until(() => counted.calls('get') >= 3 || second.settled());
    expect(second.settled()).toBe(false);
    gate.resolve('first');
    expect(await Promise.all([first, second.promise])).toEqual(['first', 'first']);
    expect(runs).toBe(1);
  });

  it('lets a waiting duplicate run when the first call fails', async () => {
    const counted = countedStore(store);
    const gate = deferred<string>();
    let runs = 0;
    const slow = makeIdempotent(
      (_id: string) => {
        runs += 1;
        return runs === 1 ? gate.promise : Promise.resolve('second');
      },
      { store: counted.store, key: (id) => id, wait: { timeoutMs: 60_000, intervalMs: 10 } },
    );
    const first = slow('k').catch((e: unknown) => e);
    await until(() => runs === 1);
    const second = watched(slow('k'));
    // In the wait when the first call fails: the run it then makes is the wait's.
    await until(() => counted.calls('get') >= 3 || second.settled());
    expect(second.settled()).toBe(false);
    gate.reject(new Error('boom'));
    expect(await first).toEqual(new Error('boom'));
    expect(await second.promise).toBe('second');
    expect(runs).toBe(2);
  });

  it('gives up waiting after its budget with CallInProgressError', async () => {
    const counted = countedStore(store);
    const gate = deferred<string>();
    let runs = 0;
    // Long enough that the claim before the wait never spends the whole budget on a busy machine.
    const slow = makeIdempotent(
      (_id: string) => {
        runs += 1;
        return gate.promise;
      },
      { store: counted.store, key: (id) => id, wait: { timeoutMs: 300, intervalMs: 10 } },
    );
    const first = slow('k');
    await until(() => runs === 1);
    await expect(slow('k')).rejects.toBeInstanceOf(CallInProgressError);
    // It waited (read the row) before giving up, rather than refusing at once.
    expect(counted.calls('get')).toBeGreaterThanOrEqual(1);
    gate.resolve('x');
    await first;
    expect(runs).toBe(1);
  });

  // Nobody runs the key any more, and whether its effect stuck is for an operator to say.
  it('holds the key for an operator when the store fails to record the result', async () => {
    let runs = 0;
    const job = makeIdempotent(
      async (_id: string) => {
        runs += 1;
        return { total: 10 };
      },
      { store: failingFinish(store), key: (id) => id },
    );
    const error = await job('k').catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ResultNotRecordedError);
    expect((error as ResultNotRecordedError).cause).toBeInstanceOf(FinishFailedError);
    expect((error as ResultNotRecordedError).result).toEqual({ total: 10 });
    expect(await store.get('k')).toMatchObject({ status: 'pending', unrecorded: true });
    await expect(job('k')).rejects.toBeInstanceOf(CallOutcomeUnknownError);
    expect(runs).toBe(1);
  });

  // Results JSON alone cannot give back: each must replay as the first call returned it.
  const faithful: readonly [string, unknown, (replayed: unknown) => void][] = [
    [
      'a Date',
      new Date(Date.UTC(2026, 10, 30, 6)),
      (replayed) => {
        expect(replayed).toBeInstanceOf(Date);
        expect((replayed as Date).toISOString()).toBe('2026-11-30T06:00:00.000Z');
      },
    ],
    [
      'an invalid Date',
      new Date(Number.NaN),
      (replayed) => {
        expect(replayed).toBeInstanceOf(Date);
        expect(Number.isNaN((replayed as Date).getTime())).toBe(true);
      },
    ],
    ['-0', -0, (replayed) => expect(Object.is(replayed, -0)).toBe(true)],
    ['NaN', Number.NaN, (replayed) => expect(Number.isNaN(replayed)).toBe(true)],
    ['Infinity', Number.POSITIVE_INFINITY, (replayed) => expect(replayed).toBe(Infinity)],
    ['-Infinity', Number.NEGATIVE_INFINITY, (replayed) => expect(replayed).toBe(-Infinity)],
    ['a BigInt', 10n ** 30n, (replayed) => expect(replayed).toBe(10n ** 30n)],
    [
      'an object with an undefined member (left out, as JSON.stringify does)',
      { a: undefined, b: 1 },
      (replayed) => {
        expect(replayed).toStrictEqual({ b: 1 });
        expect(Object.keys(replayed as object)).toEqual(['b']);
      },
    ],
    [
      'all of them nested, beside data that looks like the encoding',
      { at: new Date(0), list: [1, undefined, -0, Number.NaN], n: 5n, $t: 'date', v: { $t: 'x' } },
      (replayed) => {
        const value = replayed as { at: Date; list: unknown[]; n: bigint };
        expect(value.at).toBeInstanceOf(Date);
        expect(value.at.getTime()).toBe(0);
        expect(value.list).toHaveLength(4);
        expect(value.list[1]).toBeUndefined();
        expect(Object.is(value.list[2], -0)).toBe(true);
        expect(Number.isNaN(value.list[3])).toBe(true);
        expect(value.n).toBe(5n);
        expect(replayed).toMatchObject({ $t: 'date', v: { $t: 'x' } });
      },
    ],
    [
      'a member named __proto__',
      JSON.parse('{"__proto__":{"x":1},"d":"2026"}') as unknown,
      (replayed) => {
        expect(Object.getPrototypeOf(replayed)).toBe(Object.prototype);
        expect(Object.keys(replayed as object)).toEqual(['__proto__', 'd']);
        expect(Object.getOwnPropertyDescriptor(replayed, '__proto__')?.value).toEqual({ x: 1 });
      },
    ],
  ];

  it.each(faithful)('replays %s exactly, running once', async (_name, result, check) => {
    let runs = 0;
    const job = makeIdempotent(
      async (_id: string) => {
        runs += 1;
        return result;
      },
      { store, key: (id) => id },
    );
    expect(await job('k')).toBe(result);
    check(await job('k'));
    expect(runs).toBe(1);
    expect((await store.get('k'))?.status).toBe('done');
  });

  class Receipt {
    constructor(readonly id: string) {}
  }
  const cyclic: { self?: unknown } = {};
  cyclic.self = cyclic;
  // Results with no faithful stored form: the key is recorded done with that outcome.
  const unstorable: readonly [string, unknown, string][] = [
    ['a Map', new Map([['a', 1]]), 'an instance of Map at $'],
    ['a Set', { tags: new Set(['a']) }, 'an instance of Set at $.tags'],
    ['a class instance', [new Receipt('r-1')], 'an instance of Receipt at $[0]'],
    ['a function', { retry: () => undefined }, 'a function at $.retry'],
    ['a cycle', cyclic, 'a circular reference at $.self'],
  ];

  it.each(unstorable)(
    'records %s as not storable: every call gets ResultNotStorableError, the function runs once',
    async (_name, result, where) => {
      let runs = 0;
      const job = makeIdempotent(
        async (_id: string) => {
          runs += 1;
          return result;
        },
        { store, key: (id) => id },
      );
      const first = await job('k').catch((e: unknown) => e);
      expect(first).toBeInstanceOf(ResultNotStorableError);
      expect((first as ResultNotStorableError).result).toBe(result);
      expect((first as ResultNotStorableError).code).toBe('IDEMPOTENCY_UNSERIALIZABLE_RESPONSE');
      expect((first as ResultNotStorableError).message).toContain(where);
      expect((await store.get('k'))?.status).toBe('done');
      for (let retry = 0; retry < 2; retry++) {
        const again = await job('k').catch((e: unknown) => e);
        expect(again).toBeInstanceOf(ResultNotStorableError);
        expect((again as ResultNotStorableError).result).toBeUndefined();
        expect((again as ResultNotStorableError).message).toContain(where);
      }
      expect(runs).toBe(1);
    },
  );

  it('records a custom codec output JSON cannot hold as not storable', async () => {
    let runs = 0;
    const job = makeIdempotent(
      async (_id: string) => {
        runs += 1;
        return 1;
      },
      {
        store,
        key: (id) => id,
        result: { serialize: () => Number.NaN, deserialize: (stored) => stored as number },
      },
    );
    await expect(job('k')).rejects.toBeInstanceOf(ResultNotStorableError);
    await expect(job('k')).rejects.toBeInstanceOf(ResultNotStorableError);
    expect(runs).toBe(1);
  });

  it('neither replays nor runs a result past its retention', async () => {
    let clock = 1000;
    let runs = 0;
    const job = makeIdempotent(
      async (_id: string) => {
        runs += 1;
        return runs;
      },
      { store, key: (id) => id, ttlSeconds: 60, now: () => clock },
    );
    expect(await job('k')).toBe(1);
    clock = 1059;
    expect(await job('k')).toBe(1);
    clock = 1060;
    const error = await job('k').catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ResultExpiredError);
    expect((error as ResultExpiredError).record.expires).toBe(1060);
    expect(runs).toBe(1);
  });

  it('stores and replays through a custom result codec', async () => {
    const stamp = makeIdempotent(async (_id: string) => new Date(Date.UTC(2026, 10, 30)), {
      store,
      key: (id) => id,
      result: {
        serialize: (date) => date.toISOString(),
        deserialize: (text) => new Date(text as string),
      },
    });
    const first = await stamp('k');
    const replayed = await stamp('k');
    expect(replayed).toBeInstanceOf(Date);
    expect(replayed.getTime()).toBe(first.getTime());
    expect((await store.get('k'))?.response).toBe('2026-11-30T00:00:00.000Z');
  });

  it('refuses a bad key before running anything', async () => {
    let runs = 0;
    const job = makeIdempotent(
      async (id: unknown) => {
        runs += 1;
        return id;
      },
      { store, key: (id) => id as string },
    );
    await expect(job('')).rejects.toBeInstanceOf(InvalidKeyError);
    await expect(job(42)).rejects.toBeInstanceOf(InvalidKeyError);
    expect(runs).toBe(0);
    expect(await store.counts()).toEqual({ pending: 0, done: 0 });
  });
});

describe('makeIdempotent options', () => {
  it('refuses bad options when the wrapper is made', async () => {
    const [factory] = factories;
    const { store, close } = await (factory as NonNullable<typeof factory>).open();
    const fn = async () => 1;
    const key = () => 'k';
    expect(() => makeIdempotent(fn, { store, key: 'k' as never })).toThrow(InvalidOptionError);
    expect(() => makeIdempotent(fn, { store: {} as never, key })).toThrow(InvalidOptionError);
    // The lease-less contract alone (reserve, finish, get, …): the engine needs acquire.
    const leaseless = { reserve: () => true, finish: () => true, get: () => null };
    expect(() => makeIdempotent(fn, { store: leaseless as never, key })).toThrow(
      'store must be a LeasedIdempotencyStore, as every store of this package is',
    );
    expect(() => makeIdempotent(fn, { store, key, ttlSeconds: 0 })).toThrow(InvalidOptionError);
    expect(() => makeIdempotent(fn, { store, key, leaseSeconds: Number.NaN })).toThrow(
      InvalidOptionError,
    );
    expect(() => makeIdempotent(fn, { store, key, wait: { timeoutMs: -1 } })).toThrow(
      InvalidOptionError,
    );
    expect(() => makeIdempotent(fn, { store, key, payload: 1 as never })).toThrow(
      InvalidOptionError,
    );
    await close();
  });
});
