import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import {
  type AcquireResult,
  InvalidFingerprintError,
  InvalidKeyError,
  InvalidLimitError,
  InvalidOptionError,
  InvalidTimeError,
  type LeasedIdempotencyStore,
  MAX_KEY_BYTES,
} from '../../src/index.js';
import type { HarnessFactory, StoreHarness } from './harness.js';

const LEASE = { expires: 1000, now: 100, leaseSeconds: 30 };

/** The fencing token of an `acquire` that must have acquired. */
export function tokenOf(result: AcquireResult<unknown> | undefined): number {
  if (result?.status !== 'acquired') {
    throw new Error(`expected an acquired key, got ${JSON.stringify(result)}`);
  }
  return result.fencingToken;
}

/**
 * The fenced leases of issue 13, run against any store that has them. The factory returns a
 * fresh, empty store.
 */
export function describeLeaseContract(dialect: string, makeHarness: HarnessFactory): void {
  describe(`lease contract: ${dialect}`, () => {
    let h: StoreHarness;
    let store: LeasedIdempotencyStore;
    beforeEach(async () => {
      h = await makeHarness();
      store = h.store as LeasedIdempotencyStore;
    });
    afterEach(async () => {
      await h.close();
    });

    it('runs the fenced finishes and acquires called before close, each to its last statement', async () => {
      const ids = Array.from({ length: 20 }, (_, i) => `k${String(i).padStart(2, '0')}`);
      const tokens: number[] = [];
      for (const id of ids) tokens.push(tokenOf(await store.acquire(id, 'd', LEASE)));
      await store.finish('k00', 'd', { n: 0 }, tokens[0]);
      // In one turn: a repeated finish whose own update changes nothing and that must read the
      // row next, fenced finishes, an acquire that must read before it writes, then close.
      const repeated = store.finish('k00', 'd', { n: 0 }, tokens[0]);
      const finishes = ids
        .slice(1)
        .map((id, i) => store.finish(id, 'd', { n: i + 1 }, tokens[i + 1]));
      const fresh = store.acquire('fresh', 'd', LEASE);
      const closed = store.close();
      expect(await repeated).toBe(true);
      expect(await Promise.all(finishes)).toEqual(ids.slice(1).map(() => true));
      expect((await fresh).status).toBe('acquired');
      await closed;
      const rows = await h.rows();
      expect(rows.map((row) => [row.id, row.status, row.response])).toEqual([
        ['fresh', 'pending', null],
        ...ids.map((id, i) => [id, 'done', `{"n":${i}}`]),
      ]);
    });

    it('acquires a key of MAX_KEY_BYTES UTF-8 bytes and refuses one byte more, writing nothing', async () => {
      const longest = `${'é'.repeat((MAX_KEY_BYTES - 2) / 2)}ab`;
      const over = `${longest}x`;
      await expect(
        Promise.resolve().then(() => store.acquire(over, 'd', LEASE)),
      ).rejects.toBeInstanceOf(InvalidKeyError);
      await expect(
        Promise.resolve().then(() => store.acquire('k', over, LEASE)),
      ).rejects.toBeInstanceOf(InvalidFingerprintError);
      await expect(
        Promise.resolve().then(() => store.renew(over, 'd', 1, 200)),
      ).rejects.toBeInstanceOf(InvalidKeyError);
      await expect(Promise.resolve().then(() => store.releasePending(over))).rejects.toBeInstanceOf(
        InvalidKeyError,
      );
      expect(await h.rows()).toEqual([]);
      const got = await store.acquire(longest, longest, LEASE);
      expect(got.status).toBe('acquired');
      expect(await store.get(longest)).toMatchObject({ key: longest, status: 'pending' });
    });

    it('acquires a missing key with a fresh fencing token and a lease until now + leaseSeconds', async () => {
      const a = await store.acquire('k', 'd', LEASE);
      expect(a).toEqual({
        status: 'acquired',
        fencingToken: expect.any(Number),
        leaseUntil: 130,
        takenOver: false,
      });
      const token = tokenOf(a);
      expect(Number.isSafeInteger(token) && token > 1).toBe(true);
      expect(await store.get('k')).toMatchObject({
        status: 'pending',
        expires: 1000,
        leaseUntil: 130,
        fencingToken: token,
        unrecorded: false,
      });
    });

    it('reports success when a fenced finish is repeated after it landed (a lost acknowledgement)', async () => {
      const token = tokenOf(await store.acquire('k', 'd', LEASE));
      expect(await store.finish('k', 'd', { receipt: 1 }, token)).toBe(true);
      // The same owner, token and answer again: its answer is there, so it is not told it lost.
      expect(await store.finish('k', 'd', { receipt: 1 }, token)).toBe(true);
      // Another answer, another token, another fingerprint: not this owner's answer.
      expect(await store.finish('k', 'd', { receipt: 2 }, token)).toBe(false);
      expect(await store.finish('k', 'd', { receipt: 1 }, token + 2)).toBe(false);
      expect(await store.finish('k', 'e', { receipt: 1 }, token)).toBe(false);
      expect(await store.get('k')).toMatchObject({ status: 'done', response: { receipt: 1 } });
    });

    it('reports a live lease as in progress, and changes nothing', async () => {
      const token = tokenOf(await store.acquire('k', 'd', LEASE));
      expect(await store.acquire('k', 'd', { ...LEASE, now: 129.5 })).toEqual({
        status: 'inProgress',
        fencingToken: token,
        leaseUntil: 130,
        unrecorded: false,
      });
      expect(await store.get('k')).toMatchObject({ fencingToken: token, leaseUntil: 130 });
    });

    it('takes over a lapsed lease of the same fingerprint at lease_until <= now, raising the token', async () => {
      const first = tokenOf(await store.acquire('k', 'd', LEASE));
      const taken = await store.acquire('k', 'd', { expires: 2000, now: 130, leaseSeconds: 10 });
      expect(taken).toEqual({
        status: 'acquired',
        fencingToken: expect.any(Number),
        leaseUntil: 140,
        takenOver: true,
      });
      const second = tokenOf(taken);
      expect(second).toBeGreaterThan(first);
      expect(await store.get('k')).toMatchObject({
        status: 'pending',
        expires: 2000,
        leaseUntil: 140,
        fencingToken: second,
      });
      const third = await store.acquire('k', 'd', { ...LEASE, now: 500 });
      expect(third).toMatchObject({ status: 'acquired', takenOver: true });
      expect(tokenOf(third)).toBeGreaterThan(second);
      expect((await store.get('k'))?.fencingToken).toBe(tokenOf(third));
    });

    it('never lets another fingerprint take over: mismatch, row unchanged', async () => {
      const token = tokenOf(await store.acquire('k', 'd', LEASE));
      const other = await store.acquire('k', 'other', { ...LEASE, now: 500 });
      expect(other).toMatchObject({
        status: 'mismatch',
        record: { fingerprint: 'd', fencingToken: token },
      });
      expect(await store.get('k')).toMatchObject({
        fingerprint: 'd',
        fencingToken: token,
        leaseUntil: 130,
      });
    });

    it('reports a done row with its record, and a done row of another fingerprint as a mismatch', async () => {
      const token = tokenOf(await store.acquire('k', 'd', LEASE));
      expect(await store.finish('k', 'd', { r: 1 }, token)).toBe(true);
      expect(await store.acquire('k', 'd', { ...LEASE, now: 500 })).toMatchObject({
        status: 'done',
        record: { status: 'done', response: { r: 1 }, fencingToken: token },
      });
      expect(await store.acquire('k', 'x', LEASE)).toMatchObject({ status: 'mismatch' });
    });

    it('never takes over a row reserved without a lease', async () => {
      await store.reserve('k', 'd', 1000);
      expect(await store.acquire('k', 'd', { ...LEASE, now: 10_000 })).toEqual({
        status: 'inProgress',
        fencingToken: 1,
        leaseUntil: null,
        unrecorded: false,
      });
    });

    it('fences a stalled owner: after a takeover its finish, release and renew change nothing', async () => {
      // A acquires, pauses past its lease; B takes over and finishes.
      const a = tokenOf(await store.acquire('k', 'd', LEASE));
      const taken = await store.acquire('k', 'd', { ...LEASE, now: 131 });
      expect(taken).toMatchObject({ status: 'acquired', takenOver: true });
      const b = tokenOf(taken);
      expect(b).toBeGreaterThan(a);
      expect(await store.renew('k', 'd', a, 500)).toBe(false);
      expect(await store.release('k', 'd', a)).toBe(false);
      expect(await store.finish('k', 'd', { by: 'b' }, b)).toBe(true);
      // A wakes up: its answer and its release are refused; the answer is B's.
      expect(await store.finish('k', 'd', { by: 'a' }, a)).toBe(false);
      expect(await store.release('k', 'd', a)).toBe(false);
      expect(await store.get('k')).toMatchObject({ status: 'done', response: { by: 'b' } });
    });

    it('a fenced release before the takeover frees the key; the token-less calls keep the 0.1.0 contract', async () => {
      const token = tokenOf(await store.acquire('k', 'd', LEASE));
      expect(await store.release('k', 'd', token + 1)).toBe(false);
      expect(await store.release('k', 'd', token)).toBe(true);
      expect(await store.get('k')).toBeNull();
      await store.acquire('k', 'd', LEASE);
      await store.acquire('k', 'd', { ...LEASE, now: 200 });
      expect(await store.finish('k', 'd', { r: 1 })).toBe(true);
    });

    it('a key released and claimed again gets a token unlike every earlier one: stale owners are refused (ABA)', async () => {
      // A acquires and freezes past its lease; B takes it over, fails and releases the key.
      const a = tokenOf(await store.acquire('k', 'd', LEASE));
      const b = tokenOf(await store.acquire('k', 'd', { ...LEASE, now: 131 }));
      expect(await store.release('k', 'd', b)).toBe(true);
      // C claims the key afresh, on the same frozen clock.
      const claimed = await store.acquire('k', 'd', { ...LEASE, now: 131 });
      expect(claimed).toMatchObject({ status: 'acquired', takenOver: false });
      const c = tokenOf(claimed);
      // The takeover raised the row's token; the fresh claim after the release is a new draw.
      expect(b).toBeGreaterThan(a);
      expect([a, b]).not.toContain(c);
      // A and B wake up: none of their fenced writes touches C's row.
      for (const stale of [a, b]) {
        expect(await store.renew('k', 'd', stale, 10_000)).toBe(false);
        expect(await store.finish('k', 'd', { by: 'stale' }, stale)).toBe(false);
        expect(await store.release('k', 'd', stale)).toBe(false);
        expect(await store.markUnrecorded('k', 'd', stale)).toBe(false);
      }
      expect(await store.get('k')).toMatchObject({
        status: 'pending',
        fencingToken: c,
        leaseUntil: 161,
        unrecorded: false,
      });
      // A duplicate D while C runs finds the key in progress; C's answer is the one stored.
      expect(await store.acquire('k', 'd', { ...LEASE, now: 140 })).toMatchObject({
        status: 'inProgress',
        fencingToken: c,
      });
      expect(await store.finish('k', 'd', { by: 'c' }, c)).toBe(true);
      expect(await store.fetch('k', 140)).toEqual({ by: 'c' });
    });

    it("an operator's release of a live key and a new claim: the old owner's fenced writes are refused", async () => {
      const a = tokenOf(await store.acquire('k', 'd', LEASE));
      expect(await store.releasePending('k')).toBe('released');
      const c = tokenOf(await store.acquire('k', 'd', LEASE));
      expect(c).not.toBe(a);
      // The token-less release an operator's tooling may call, then a third claim.
      expect(await store.release('k', 'd')).toBe(true);
      const e = tokenOf(await store.acquire('k', 'd', LEASE));
      expect([a, c]).not.toContain(e);
      for (const stale of [a, c]) {
        expect(await store.renew('k', 'd', stale, 10_000)).toBe(false);
        expect(await store.markUnrecorded('k', 'd', stale)).toBe(false);
        expect(await store.finish('k', 'd', { by: 'stale' }, stale)).toBe(false);
        expect(await store.release('k', 'd', stale)).toBe(false);
      }
      expect(await store.get('k')).toMatchObject({ status: 'pending', fencingToken: e });
      expect(await store.finish('k', 'd', { by: 'e' }, e)).toBe(true);
      expect(await store.fetch('k', 110)).toEqual({ by: 'e' });
    });

    it('gives every fresh claim of one key a distinct token while the caller clock stands still', async () => {
      const tokens: number[] = [];
      for (let i = 0; i < 20; i++) {
        const token = tokenOf(await store.acquire('k', 'd', LEASE));
        tokens.push(token);
        expect(await store.release('k', 'd', token)).toBe(true);
      }
      expect(new Set(tokens).size).toBe(tokens.length);
    });

    it('renews only the holder of the current token', async () => {
      const token = tokenOf(await store.acquire('k', 'd', LEASE));
      expect(await store.renew('k', 'd', token, 160)).toBe(true);
      expect(await store.renew('k', 'other', token, 170)).toBe(false);
      expect((await store.get('k'))?.leaseUntil).toBe(160);
      expect(await store.acquire('k', 'd', { ...LEASE, now: 150 })).toMatchObject({
        status: 'inProgress',
        leaseUntil: 160,
      });
    });

    it('marks an unrecorded row: never taken over, owner cannot release it, listed, released by hand', async () => {
      const token = tokenOf(await store.acquire('k', 'd', LEASE));
      expect(await store.markUnrecorded('k', 'd', token + 1)).toBe(false);
      expect(await store.markUnrecorded('k', 'd', token)).toBe(true);
      expect(await store.acquire('k', 'd', { ...LEASE, now: 10_000 })).toEqual({
        status: 'inProgress',
        fencingToken: token,
        leaseUntil: null,
        unrecorded: true,
      });
      expect(await store.renew('k', 'd', token, 20_000)).toBe(false);
      expect(await store.release('k', 'd', token)).toBe(false);
      expect(await store.pendingKeys({ now: 10_000, stale: true })).toEqual([
        {
          key: 'k',
          fingerprint: 'd',
          expires: 1000,
          leaseUntil: null,
          fencingToken: token,
          state: 'unrecorded',
        },
      ]);
      expect(await store.stats(10_000)).toMatchObject({ pending: 1, lapsed: 0, unrecorded: 1 });
      expect(await store.releasePending('k')).toBe('released');
      expect(await store.get('k')).toBeNull();
    });

    it('lists only the keys that start with a prefix: one scope, exactly, with its own limit', async () => {
      // Ids around the scope's in byte order, and look-alikes: `%` and `_` are not wildcards, a
      // longer scope name is another scope, and case, NFD and 4-byte characters stay distinct.
      const scope = (name: string, key: string) => `${JSON.stringify(name)}\u001f${key}`;
      const ids = [
        '"client-6"\u001fz',
        scope('client-7', 'a'),
        scope('client-7', 'b%_'),
        scope('client-7', 'cafe\u0301'),
        scope('client-7', '\u{1f600}'),
        scope('client-77', 'a'),
        scope('Client-7', 'a'),
        '"client-7"',
        '"client-7"x',
        'client-7',
        'z',
      ];
      for (const id of ids) await store.acquire(id, 'd', LEASE);
      const done = tokenOf(await store.acquire(scope('client-7', 'done'), 'd', LEASE));
      expect(await store.finish(scope('client-7', 'done'), 'd', 1, done)).toBe(true);
      const listed = async (prefix: string, extra: { stale?: boolean; limit?: number } = {}) =>
        (await store.pendingKeys({ now: 110, prefix, ...extra })).map((row) => row.key);
      expect(await listed(scope('client-7', ''))).toEqual([
        scope('client-7', 'a'),
        scope('client-7', 'b%_'),
        scope('client-7', 'cafe\u0301'),
        scope('client-7', '\u{1f600}'),
      ]);
      expect(await listed(scope('client-7', ''), { limit: 2 })).toEqual([
        scope('client-7', 'a'),
        scope('client-7', 'b%_'),
      ]);
      expect(await listed(scope('client-7', ''), { stale: true })).toEqual([]);
      expect(await listed(scope('client-7', 'b%'))).toEqual([scope('client-7', 'b%_')]);
      expect(await listed('\u{1f600}')).toEqual([]);
      expect(await listed('')).toHaveLength(ids.length);
      await expect(
        (async () => store.pendingKeys({ now: 1, prefix: '\ud800' }))(),
      ).rejects.toBeInstanceOf(InvalidOptionError);
    });

    it('lists pending rows with their state, ascending by key; --stale keeps the ones to look at', async () => {
      await store.acquire('a-live', 'd', LEASE);
      const lapsed = tokenOf(await store.acquire('b-lapsed', 'd', { ...LEASE, leaseSeconds: 1 }));
      await store.reserve('c-unleased-old', 'd', 50);
      await store.reserve('d-unleased', 'd', 5000);
      const done = tokenOf(await store.acquire('e-done', 'd', LEASE));
      expect(await store.finish('e-done', 'd', 1, done)).toBe(true);
      const all = await store.pendingKeys({ now: 110 });
      expect(all.map((row) => [row.key, row.state])).toEqual([
        ['a-live', 'live'],
        ['b-lapsed', 'lapsed'],
        ['c-unleased-old', 'unleased'],
        ['d-unleased', 'unleased'],
      ]);
      expect(all[1]).toEqual({
        key: 'b-lapsed',
        fingerprint: 'd',
        expires: 1000,
        leaseUntil: 101,
        fencingToken: lapsed,
        state: 'lapsed',
      });
      expect((await store.pendingKeys({ now: 110, stale: true })).map((row) => row.key)).toEqual([
        'b-lapsed',
        'c-unleased-old',
      ]);
      expect((await store.pendingKeys({ now: 110, limit: 2 })).map((row) => row.key)).toEqual([
        'a-live',
        'b-lapsed',
      ]);
      expect(await store.stats(110)).toMatchObject({
        pending: 4,
        done: 1,
        lapsed: 1,
        unrecorded: 0,
      });
      expect(await store.stats(200)).toMatchObject({ lapsed: 2 });
    });

    it('releasePending deletes a pending row whatever its lease, and refuses done, missing and other fingerprints', async () => {
      await store.acquire('p', 'd', LEASE);
      await store.acquire('q', 'd', LEASE);
      const done = tokenOf(await store.acquire('done', 'd', LEASE));
      expect(await store.finish('done', 'd', 1, done)).toBe(true);
      expect(await store.releasePending('missing')).toBe('missing');
      expect(await store.releasePending('done')).toBe('done');
      expect(await store.releasePending('p', 'other')).toBe('mismatch');
      expect(await store.releasePending('p', 'd')).toBe('released');
      expect(await store.releasePending('q')).toBe('released');
      expect((await h.rows()).map((row) => row.id)).toEqual(['done']);
    });

    it('refuses bad lease arguments with a typed error and changes nothing', async () => {
      for (const leaseSeconds of [0, -1, Number.NaN, Infinity, '5', null]) {
        await expect(
          (async () =>
            store.acquire('k', 'd', { ...LEASE, leaseSeconds: leaseSeconds as number }))(),
        ).rejects.toBeInstanceOf(InvalidOptionError);
      }
      await expect(
        (async () => store.acquire('k', 'd', { ...LEASE, now: Number.NaN }))(),
      ).rejects.toBeInstanceOf(InvalidTimeError);
      for (const attempt of [0, 1.5, -1, '1', Number.NaN]) {
        await expect(
          (async () => store.finish('k', 'd', 1, attempt as number))(),
        ).rejects.toBeInstanceOf(InvalidOptionError);
        await expect(
          (async () => store.renew('k', 'd', attempt as number, 10))(),
        ).rejects.toBeInstanceOf(InvalidOptionError);
      }
      expect(await h.rows()).toEqual([]);
    });

    it('refuses a bad pendingKeys limit with InvalidLimitError, as expired and purge do', async () => {
      for (const limit of [0, -1, 1.5, 10_001, Number.NaN, '5', true]) {
        await expect(
          (async () => store.pendingKeys({ now: 1, limit: limit as number }))(),
        ).rejects.toBeInstanceOf(InvalidLimitError);
      }
      expect(await store.pendingKeys({ now: 1, limit: 10_000 })).toEqual([]);
    });

    it('refuses a pendingKeys stale that is not a boolean, rather than reading it as truthy', async () => {
      tokenOf(await store.acquire('live', 'd', LEASE));
      for (const stale of ['no', 0, 1, null, {}]) {
        await expect(
          (async () => store.pendingKeys({ now: 1, stale: stale as boolean }))(),
        ).rejects.toBeInstanceOf(InvalidOptionError);
      }
      for (const options of [null, 'now']) {
        await expect(
          (async () => store.pendingKeys(options as unknown as { now: number }))(),
        ).rejects.toBeInstanceOf(InvalidOptionError);
      }
      expect((await store.pendingKeys({ now: 1, stale: false })).map((key) => key.key)).toEqual([
        'live',
      ]);
      expect(await store.pendingKeys({ now: 1, stale: true })).toEqual([]);
    });

    it('gives exactly one acquired among concurrent takeovers of a lapsed key', async () => {
      const first = tokenOf(await store.acquire('k', 'd', LEASE));
      const results = await Promise.all(
        Array.from({ length: 12 }, () => store.acquire('k', 'd', { ...LEASE, now: 200 })),
      );
      const won = results.filter((result) => result.status === 'acquired');
      expect(won).toEqual([
        { status: 'acquired', fencingToken: expect.any(Number), leaseUntil: 230, takenOver: true },
      ]);
      expect(tokenOf(won[0])).toBeGreaterThan(first);
      expect(results.filter((result) => result.status === 'inProgress')).toHaveLength(11);
    });
  });
}
