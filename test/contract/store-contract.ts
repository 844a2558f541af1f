import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import {
  InvalidFingerprintError,
  InvalidKeyError,
  InvalidLimitError,
  InvalidOptionError,
  InvalidTimeError,
  MAX_KEY_BYTES,
  retentionCycle,
  StoreClosedError,
  UnserializableResponseError,
} from '../../src/index.js';
import type { HarnessFactory, RawRow, StoreHarness } from './harness.js';

const done = (id: string, expires: number, response = '{"r":1}', fingerprint = 'd'): RawRow => ({
  id,
  fingerprint,
  status: 'done',
  response,
  expires,
});
const pending = (id: string, expires: number, fingerprint = 'd'): RawRow => ({
  id,
  fingerprint,
  status: 'pending',
  response: null,
  expires,
});

const BAD_LIMITS: unknown[] = [
  0,
  101,
  -1,
  1.5,
  10.0001,
  true,
  false,
  Number.NaN,
  '5',
  null,
  Infinity,
  [5],
  {},
];
const BAD_TIMES: unknown[] = [
  Number.NaN,
  Infinity,
  -Infinity,
  '10',
  null,
  undefined,
  true,
  10n,
  {},
];
const BAD_TEXTS: unknown[] = [
  '',
  5,
  null,
  undefined,
  {},
  [],
  true,
  '\uD800',
  'a\uDC00b',
  'a\u0000b',
  Symbol('k'),
];

function cyclic(): unknown {
  const value: Record<string, unknown> = { a: 1 };
  value.self = value;
  return value;
}

const BAD_RESPONSES: [string, () => unknown][] = [
  ['undefined', () => undefined],
  ['a function', () => () => 1],
  ['a symbol', () => Symbol('s')],
  ['a BigInt', () => 10n],
  ['a cycle', cyclic],
  ['NaN inside', () => ({ total: Number.NaN })],
  ['Infinity inside', () => ({ items: [1, Infinity] })],
  ['-Infinity inside', () => [{ x: -Infinity }]],
  ['undefined inside an object', () => ({ a: undefined })],
  ['undefined inside an array', () => [1, undefined]],
  ['a function inside', () => ({ f() {} })],
  ['a BigInt inside', () => ({ n: 1n })],
  ['a Map', () => new Map([['a', 1]])],
  ['a Set inside', () => ({ s: new Set([1]) })],
  ['a sparse array', () => new Array(3)],
  ['a symbol-keyed property', () => ({ [Symbol('k')]: 1 })],
];

/**
 * The contract of docs/store.md, run against any dialect. The factory returns a fresh, empty store.
 */
export function describeStoreContract(dialect: string, makeHarness: HarnessFactory): void {
  describe(`store contract: ${dialect}`, () => {
    let h: StoreHarness;
    beforeEach(async () => {
      h = await makeHarness();
    });
    afterEach(async () => {
      await h.close();
    });

    describe('reserve', () => {
      it('inserts a missing key as pending with no response', async () => {
        expect(await h.store.reserve('k1', 'fingerprint-1', 100.5)).toBe(true);
        expect(await h.rows()).toEqual([pending('k1', 100.5, 'fingerprint-1')]);
      });

      it('leaves an existing pending key unchanged and returns false', async () => {
        await h.store.reserve('k1', 'a', 100);
        expect(await h.store.reserve('k1', 'a', 100)).toBe(false);
        expect(await h.store.reserve('k1', 'b', 500)).toBe(false);
        expect(await h.rows()).toEqual([pending('k1', 100, 'a')]);
      });

      it('leaves a done key unchanged, expired or not', async () => {
        await h.seed([done('live', 100), done('old', 5)]);
        expect(await h.store.reserve('live', 'x', 1000)).toBe(false);
        expect(await h.store.reserve('old', 'x', 1000)).toBe(false);
        expect(await h.rows()).toEqual([done('live', 100), done('old', 5)]);
      });

      it('leaves a pending key past its expiry unchanged', async () => {
        await h.seed([pending('stale', 1)]);
        expect(await h.store.reserve('stale', 'other', 1000)).toBe(false);
        expect(await h.rows()).toEqual([pending('stale', 1)]);
      });

      it('gives exactly one true among concurrent reserves of one key', async () => {
        const results = await Promise.all(
          Array.from({ length: 20 }, (_, i) => h.store.reserve('race', `d${i}`, 50)),
        );
        expect(results.filter(Boolean)).toHaveLength(1);
        const rows = await h.rows();
        expect(rows).toHaveLength(1);
        expect(rows[0]?.fingerprint).toBe(`d${results.indexOf(true)}`);
      });

      it('keeps expires exactly, fractions and large values included', async () => {
        await h.store.reserve('a', 'd', 16777217.25);
        await h.store.reserve('b', 'd', -3.5);
        await h.store.reserve('c', 'd', 1.7e12 + 0.125);
        expect((await h.rows()).map((row) => row.expires)).toEqual([
          16777217.25,
          -3.5,
          1.7e12 + 0.125,
        ]);
      });

      it('treats keys as exact strings (case, spaces, unicode)', async () => {
        const keys = ['K', 'k', ' k', 'k ', 'é', 'e\u0301', '\u{1F600}', 'a\tb', 'x'.repeat(1000)];
        for (const key of keys) expect(await h.store.reserve(key, 'd', 10)).toBe(true);
        expect(await h.rows()).toHaveLength(keys.length);
        for (const key of keys) expect((await h.store.get(key))?.key).toBe(key);
      });
    });

    describe('finish', () => {
      it('stores the response as JSON text and marks the row done', async () => {
        await h.store.reserve('k', 'd', 100);
        expect(await h.store.finish('k', 'd', { receipt: 1, items: ['a', null, true] })).toBe(true);
        expect(await h.rows()).toEqual([done('k', 100, '{"receipt":1,"items":["a",null,true]}')]);
      });

      it('refuses a different fingerprint and changes nothing', async () => {
        await h.store.reserve('k', 'mine', 100);
        expect(await h.store.finish('k', 'theirs', { r: 2 })).toBe(false);
        expect(await h.rows()).toEqual([pending('k', 100, 'mine')]);
      });

      it('never overwrites a done row, whatever the fingerprint', async () => {
        await h.store.reserve('k', 'd', 100);
        await h.store.finish('k', 'd', { first: true });
        expect(await h.store.finish('k', 'd', { second: true })).toBe(false);
        expect(await h.store.finish('k', 'other', { third: true })).toBe(false);
        expect(await h.rows()).toEqual([done('k', 100, '{"first":true}')]);
      });

      it('returns false for a missing key and creates nothing', async () => {
        expect(await h.store.finish('ghost', 'd', { r: 1 })).toBe(false);
        expect(await h.rows()).toEqual([]);
      });

      it('round-trips every JSON shape through fetch', async () => {
        const values = [
          null,
          0,
          -1.5,
          'text',
          '',
          true,
          false,
          [],
          {},
          [1, [2, [3]]],
          { a: { b: 'é\u{1F600}' } },
        ];
        for (const [i, value] of values.entries()) {
          await h.store.reserve(`k${i}`, 'd', 100);
          expect(await h.store.finish(`k${i}`, 'd', value)).toBe(true);
          expect(await h.store.fetch(`k${i}`, 0)).toEqual(value);
        }
      });

      it('stores what toJSON returns (a Date becomes its ISO string)', async () => {
        await h.store.reserve('k', 'd', 100);
        await h.store.finish('k', 'd', { at: new Date(0) });
        expect(await h.store.fetch('k', 0)).toEqual({ at: '1970-01-01T00:00:00.000Z' });
      });

      it('allows a value shared twice without a cycle', async () => {
        const shared = { x: 1 };
        await h.store.reserve('k', 'd', 100);
        expect(await h.store.finish('k', 'd', { a: shared, b: shared })).toBe(true);
        expect(await h.store.fetch('k', 0)).toEqual({ a: { x: 1 }, b: { x: 1 } });
      });
    });

    describe('fetch', () => {
      it('returns the parsed answer of a live done row', async () => {
        await h.seed([done('k', 100, '{"receipt":7}')]);
        expect(await h.store.fetch('k', 99.999)).toEqual({ receipt: 7 });
      });

      it('stops replaying at now == expires', async () => {
        await h.seed([done('k', 100)]);
        expect(await h.store.fetch('k', 100)).toBeNull();
        expect(await h.store.fetch('k', 101)).toBeNull();
      });

      it('returns null for pending and missing keys', async () => {
        await h.seed([pending('p', 100)]);
        expect(await h.store.fetch('p', 0)).toBeNull();
        expect(await h.store.fetch('missing', 0)).toBeNull();
      });
    });

    // A store may keep answers it read (the SQLite answer cache): every state an answer leaves is
    // fetched again after it was replayed, so an answer kept past its row would be caught here.
    describe('fetch again after a replay', () => {
      const replayed = async (key: string, expires: number, response: unknown) => {
        await h.store.reserve(key, 'v1', expires);
        await h.store.finish(key, 'v1', response);
        expect(await h.store.fetch(key, 1)).toEqual(response);
        expect(await h.store.fetch(key, 2)).toEqual(response);
      };

      it('replays a live answer every time, and nothing from now == expires on', async () => {
        await replayed('k', 10, { receipt: 1 });
        expect(await h.store.fetch('k', 9.999)).toEqual({ receipt: 1 });
        expect(await h.store.fetch('k', 10)).toBeNull();
        expect(await h.store.fetch('k', 11)).toBeNull();
      });

      it('answers a pending key with nothing every time, then its answer once finished', async () => {
        await h.store.reserve('k', 'v1', 10);
        expect(await h.store.fetch('k', 1)).toBeNull();
        expect(await h.store.fetch('k', 1)).toBeNull();
        await h.store.finish('k', 'v1', { receipt: 1 });
        expect(await h.store.fetch('k', 1)).toEqual({ receipt: 1 });
      });

      it('replays nothing of a purged answer, even to a clock behind the purge, then the next answer', async () => {
        await replayed('k', 10, { receipt: 1 });
        expect(await h.store.purge(10)).toEqual(['k']);
        expect(await h.store.fetch('k', 5)).toBeNull();
        expect(await h.store.reserve('k', 'v2', 20)).toBe(true);
        expect(await h.store.fetch('k', 5)).toBeNull();
        await h.store.finish('k', 'v2', { receipt: 2 });
        expect(await h.store.fetch('k', 5)).toEqual({ receipt: 2 });
        expect(await h.store.fetch('k', 6)).toEqual({ receipt: 2 });
      });

      it('replays nothing of a swept answer, even to a clock behind the sweep, then the next answer', async () => {
        await replayed('k', 10, { receipt: 1 });
        expect(await h.store.sweepBatch(10, 10)).toBe(1);
        expect(await h.store.fetch('k', 5)).toBeNull();
        expect(await h.store.reserve('k', 'v2', 20)).toBe(true);
        await h.store.finish('k', 'v2', { receipt: 2 });
        expect(await h.store.fetch('k', 5)).toEqual({ receipt: 2 });
      });

      it('replays the answer of the run after a release, never an earlier one', async () => {
        await replayed('k', 10, { receipt: 1 });
        expect(await h.store.purge(10)).toEqual(['k']);
        expect(await h.store.reserve('k', 'v2', 20)).toBe(true);
        expect(await h.store.release('k', 'v2')).toBe(true);
        expect(await h.store.fetch('k', 5)).toBeNull();
        expect(await h.store.reserve('k', 'v3', 30)).toBe(true);
        expect(await h.store.fetch('k', 5)).toBeNull();
        await h.store.finish('k', 'v3', { receipt: 3 });
        expect(await h.store.fetch('k', 5)).toEqual({ receipt: 3 });
        expect(await h.store.fetch('k', 6)).toEqual({ receipt: 3 });
      });

      it('keeps replaying one answer while another key is purged', async () => {
        await replayed('short', 10, { receipt: 1 });
        await replayed('long', 100, { receipt: 2 });
        expect(await h.store.purge(10)).toEqual(['short']);
        expect(await h.store.fetch('short', 5)).toBeNull();
        expect(await h.store.fetch('long', 50)).toEqual({ receipt: 2 });
      });
    });

    describe('expired', () => {
      it('lists done rows with expires <= now, ascending by id bytes', async () => {
        await h.seed([
          done('a9', 5),
          done('a10', 5),
          done('B', 10),
          done('a', 10),
          done('late', 10.5),
          done('\u{1F600}', 1),
          done('\uFF5E', 1),
          done('z', 1),
        ]);
        expect(await h.store.expired(10, 100)).toEqual([
          'B',
          'a',
          'a10',
          'a9',
          'z',
          '\uFF5E',
          '\u{1F600}',
        ]);
      });

      it('never lists a pending row, even past its expiry', async () => {
        await h.seed([pending('p', 1), done('d', 1)]);
        expect(await h.store.expired(1000, 100)).toEqual(['d']);
      });

      it('applies the default limit of 10, and limits 1 and 100', async () => {
        await h.seed(
          Array.from({ length: 150 }, (_, i) => done(`k${String(i).padStart(3, '0')}`, i)),
        );
        const all = (await h.rows()).map((row) => row.id);
        expect(await h.store.expired(1000)).toEqual(all.slice(0, 10));
        expect(await h.store.expired(1000, 1)).toEqual(all.slice(0, 1));
        expect(await h.store.expired(1000, 100)).toEqual(all.slice(0, 100));
        expect(await h.store.expired(4.5, 100)).toEqual(all.slice(0, 5));
        expect(await h.rows()).toHaveLength(150);
      });

      it('returns an empty list on an empty store', async () => {
        expect(await h.store.expired(1e9)).toEqual([]);
      });
    });

    describe('purge', () => {
      it('deletes expired done rows and returns their ids ascending', async () => {
        await h.seed([done('b', 1), done('a', 2), done('c', 3), done('live', 50), pending('p', 1)]);
        expect(await h.store.purge(3, 100)).toEqual(['a', 'b', 'c']);
        expect(await h.rows()).toEqual([done('live', 50), pending('p', 1)]);
      });

      it('deletes at now == expires, the moment fetch stops replaying', async () => {
        await h.seed([done('k', 10)]);
        expect(await h.store.purge(9.999)).toEqual([]);
        expect(await h.store.purge(10)).toEqual(['k']);
      });

      it('never deletes a pending row, even one long past its expiry', async () => {
        await h.seed([pending('p1', -100), pending('p2', 0)]);
        expect(await h.store.purge(1e12, 100)).toEqual([]);
        expect(await h.rows()).toEqual([pending('p1', -100), pending('p2', 0)]);
      });

      it('takes the lowest ids first, default 10, and limits 1 and 100', async () => {
        await h.seed(
          Array.from({ length: 120 }, (_, i) => done(`k${String(i).padStart(3, '0')}`, 1)),
        );
        const all = (await h.rows()).map((row) => row.id);
        expect(await h.store.purge(1, 1)).toEqual(all.slice(0, 1));
        expect(await h.store.purge(1)).toEqual(all.slice(1, 11));
        expect(await h.store.purge(1, 100)).toEqual(all.slice(11, 111));
        expect((await h.rows()).map((row) => row.id)).toEqual(all.slice(111));
      });

      it('makes a purged key a new request', async () => {
        await h.store.reserve('k', 'v1', 10);
        await h.store.finish('k', 'v1', { receipt: 1 });
        await h.store.purge(10);
        expect(await h.store.reserve('k', 'v2', 20)).toBe(true);
      });
    });

    describe('sweepBatch', () => {
      it('deletes expired done rows in (expires, id) order, never pending ones', async () => {
        await h.seed([
          done('b', 2),
          done('a', 3),
          done('c', 1),
          done('z', 2),
          pending('p', 0),
          done('live', 9),
        ]);
        expect(await h.store.sweepBatch(5, 2)).toBe(2);
        expect((await h.rows()).map((row) => row.id)).toEqual(['a', 'live', 'p', 'z']);
        expect(await h.store.sweepBatch(5, 10)).toBe(2);
        expect(await h.store.sweepBatch(5, 10)).toBe(0);
        expect(await h.rows()).toEqual([done('live', 9), pending('p', 0)]);
      });

      it('accepts batch sizes from 1 to 10,000 only, changing nothing otherwise', async () => {
        await h.seed([done('a', 1)]);
        for (const size of [0, 10_001, 1.5, '5', true, null, Number.NaN]) {
          await expect(
            Promise.resolve().then(() => h.store.sweepBatch(5, size as number)),
          ).rejects.toBeInstanceOf(InvalidOptionError);
        }
        await expect(
          Promise.resolve().then(() => h.store.sweepBatch(Number.NaN, 5)),
        ).rejects.toBeInstanceOf(InvalidTimeError);
        expect(await h.rows()).toEqual([done('a', 1)]);
        expect(await h.store.sweepBatch(5, 10_000)).toBe(1);
      });
    });

    describe('stats', () => {
      // A store with leases adds `lapsed` and `unrecorded`, which its lease tests check.
      const retention = async (now: number) => {
        const { pending, done, expired, stalePending } = await h.store.stats(now);
        return { pending, done, expired, stalePending };
      };

      it('reports zeros on an empty store', async () => {
        expect(await retention(0)).toEqual({
          pending: 0,
          done: 0,
          expired: 0,
          stalePending: 0,
        });
      });

      it('counts the expired backlog and stale pending rows at now', async () => {
        await h.seed([
          pending('a', 1),
          pending('b', 100),
          done('c', 1),
          done('d', 5),
          done('e', 100),
        ]);
        expect(await retention(5)).toEqual({
          pending: 2,
          done: 3,
          expired: 2,
          stalePending: 1,
        });
        expect(await retention(4.99)).toEqual({
          pending: 2,
          done: 3,
          expired: 1,
          stalePending: 1,
        });
      });
    });

    describe('counts', () => {
      it('reports zeros on an empty store', async () => {
        expect(await h.store.counts()).toEqual({ pending: 0, done: 0 });
      });

      it('counts each state, expired done rows included', async () => {
        await h.seed([
          pending('a', 1),
          pending('b', 100),
          done('c', 1),
          done('d', 100),
          done('e', 100),
        ]);
        expect(await h.store.counts()).toEqual({ pending: 2, done: 3 });
      });
    });

    describe('release', () => {
      it('deletes a pending row with the same fingerprint', async () => {
        await h.store.reserve('k', 'mine', 100);
        expect(await h.store.release('k', 'mine')).toBe(true);
        expect(await h.rows()).toEqual([]);
        expect(await h.store.reserve('k', 'again', 100)).toBe(true);
      });

      it('refuses another fingerprint, a done row and a missing key', async () => {
        await h.seed([pending('p', 100, 'mine'), done('d', 100)]);
        expect(await h.store.release('p', 'theirs')).toBe(false);
        expect(await h.store.release('d', 'd')).toBe(false);
        expect(await h.store.release('missing', 'd')).toBe(false);
        expect(await h.rows()).toEqual([done('d', 100), pending('p', 100, 'mine')]);
      });
    });

    describe('get', () => {
      it('returns the whole record with the parsed response, or null', async () => {
        await h.seed([done('d', 100, '{"a":[1]}', 'fp'), pending('p', 7.5, 'fq')]);
        expect(await h.store.get('d')).toEqual({
          key: 'd',
          fingerprint: 'fp',
          status: 'done',
          expires: 100,
          response: { a: [1] },
          leaseUntil: null,
          fencingToken: 1,
          unrecorded: false,
        });
        expect(await h.store.get('p')).toEqual({
          key: 'p',
          fingerprint: 'fq',
          status: 'pending',
          expires: 7.5,
          response: null,
          leaseUntil: null,
          fencingToken: 1,
          unrecorded: false,
        });
        expect(await h.store.get('missing')).toBeNull();
      });
    });

    describe('retentionCycle over the store', () => {
      it('returns true on an empty store and leaves the key pending with v2 until 20', async () => {
        expect(await retentionCycle(h.store, 'order-1')).toBe(true);
        expect(await h.rows()).toEqual([pending('order-1', 20, 'v2')]);
      });
    });

    describe('bad input changes nothing', () => {
      const state = [done('d', 5, '{"r":1}', 'fd'), pending('p', 100, 'fp'), done('live', 100)];

      beforeEach(async () => {
        await h.seed(state);
      });

      async function expectRefused(call: () => unknown, error: new (...args: never[]) => Error) {
        const before = await h.rows();
        await expect(Promise.resolve().then(call)).rejects.toBeInstanceOf(error);
        expect(await h.rows()).toEqual(before);
      }

      it.each(BAD_LIMITS)('expired and purge refuse the limit %s', async (limit) => {
        await expectRefused(() => h.store.expired(10, limit as number), InvalidLimitError);
        await expectRefused(() => h.store.purge(10, limit as number), InvalidLimitError);
      });

      it('validates the limit before now', async () => {
        await expectRefused(() => h.store.purge(Number.NaN, 0), InvalidLimitError);
        await expectRefused(() => h.store.expired(Number.NaN, 1.5), InvalidLimitError);
      });

      it.each(BAD_TIMES)('refuses the time %s', async (time) => {
        await expectRefused(() => h.store.reserve('new', 'd', time as number), InvalidTimeError);
        await expectRefused(() => h.store.fetch('live', time as number), InvalidTimeError);
        await expectRefused(() => h.store.expired(time as number, 10), InvalidTimeError);
        await expectRefused(() => h.store.purge(time as number, 10), InvalidTimeError);
      });

      it.each(BAD_TEXTS)('refuses the key %s', async (key) => {
        const k = key as string;
        await expectRefused(() => h.store.reserve(k, 'd', 10), InvalidKeyError);
        await expectRefused(() => h.store.finish(k, 'fp', { r: 1 }), InvalidKeyError);
        await expectRefused(() => h.store.fetch(k, 0), InvalidKeyError);
        await expectRefused(() => h.store.release(k, 'fp'), InvalidKeyError);
        await expectRefused(() => h.store.get(k), InvalidKeyError);
        await expectRefused(() => retentionCycle(h.store, k), InvalidKeyError);
      });

      it('keeps keys and fingerprints of MAX_KEY_BYTES UTF-8 bytes and refuses one byte more', async () => {
        // Two-byte and four-byte characters: the limit counts the bytes the databases keep.
        const longest = [`${'é'.repeat((MAX_KEY_BYTES - 2) / 2)}ab`, '\u{1F600}'.repeat(256)];
        for (const key of longest) {
          expect(Buffer.byteLength(key)).toBe(MAX_KEY_BYTES);
          const over = `${key}x`;
          await expectRefused(() => h.store.reserve(over, 'd', 10), InvalidKeyError);
          await expectRefused(() => h.store.finish(over, 'd', { r: 1 }), InvalidKeyError);
          await expectRefused(() => h.store.fetch(over, 0), InvalidKeyError);
          await expectRefused(() => h.store.release(over, 'd'), InvalidKeyError);
          await expectRefused(() => h.store.get(over), InvalidKeyError);
          await expectRefused(() => retentionCycle(h.store, over), InvalidKeyError);
          await expectRefused(() => h.store.reserve('k', over, 10), InvalidFingerprintError);
          await expectRefused(() => h.store.finish('k', over, { r: 1 }), InvalidFingerprintError);
          await expectRefused(() => h.store.release('k', over), InvalidFingerprintError);
        }
        const before = (await h.rows()).map((row) => row.id);
        for (const key of longest) {
          expect(await h.store.reserve(key, key, 10)).toBe(true);
          expect(await h.store.finish(key, key, { r: 1 })).toBe(true);
          expect(await h.store.fetch(key, 0)).toEqual({ r: 1 });
          expect(await h.store.get(key)).toMatchObject({ key, fingerprint: key, status: 'done' });
        }
        expect((await h.rows()).map((row) => row.id).sort()).toEqual(
          [...before, ...longest].sort(),
        );
      });

      it.each(BAD_TEXTS)('refuses the fingerprint %s', async (fingerprint) => {
        const d = fingerprint as string;
        await expectRefused(() => h.store.reserve('new', d, 10), InvalidFingerprintError);
        await expectRefused(() => h.store.finish('p', d, { r: 1 }), InvalidFingerprintError);
        await expectRefused(() => h.store.release('p', d), InvalidFingerprintError);
      });

      it.each(BAD_RESPONSES)(
        'refuses %s as a response and the row stays pending',
        async (_, make) => {
          await expectRefused(() => h.store.finish('p', 'fp', make()), UnserializableResponseError);
          expect((await h.store.get('p'))?.status).toBe('pending');
        },
      );

      it('names the path of the offending value', async () => {
        await expect(
          Promise.resolve().then(() =>
            h.store.finish('p', 'fp', { items: [{ price: Number.NaN }] }),
          ),
        ).rejects.toMatchObject({
          code: 'IDEMPOTENCY_UNSERIALIZABLE_RESPONSE',
          path: '$.items[0].price',
        });
      });
    });

    describe('close', () => {
      it('runs every operation called before close, then closes, and the rows are on disk', async () => {
        const ids = Array.from({ length: 20 }, (_, i) => `k${String(i).padStart(2, '0')}`);
        for (const id of ids) await h.store.reserve(id, 'd', 100);
        // All in one turn: the finishes are still on their way when close is called.
        const finishes = ids.map((id, i) => h.store.finish(id, 'd', { n: i }));
        const counted = h.store.counts();
        const closed = h.store.close();
        const late = expect(
          Promise.resolve().then(() => h.store.reserve('late', 'd', 100)),
        ).rejects.toBeInstanceOf(StoreClosedError);
        expect(await Promise.all(finishes)).toEqual(ids.map(() => true));
        // A read called before close is answered too (what it saw depends on the dialect's pool).
        expect(await counted).toHaveProperty('done');
        await closed;
        await late;
        // Read from the database itself, through a connection of its own.
        expect(await h.rows()).toEqual(ids.map((id, i) => done(id, 100, `{"n":${i}}`)));
      });

      it('refuses every operation after close', async () => {
        await h.store.close();
        await expect(
          Promise.resolve().then(() => h.store.reserve('k', 'd', 1)),
        ).rejects.toBeInstanceOf(StoreClosedError);
        await expect(Promise.resolve().then(() => h.store.counts())).rejects.toBeInstanceOf(
          StoreClosedError,
        );
      });
    });
  });
}
