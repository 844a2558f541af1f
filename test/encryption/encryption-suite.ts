import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { claim } from '../../src/core/claim.js';
import { resolveClaimOptions } from '../../src/core/claim-options.js';
import type { Keyring } from '../../src/core/encryption.js';
import type {
  EraseOptions,
  EraseResult,
  RekeyOptions,
  RekeyResult,
  SealingReport,
} from '../../src/core/erasure.js';
import type { LeasedIdempotencyStore, MaybePromise } from '../../src/core/store.js';
import { storedId } from '../../src/http/scope.js';
import {
  AnswerUnreadableError,
  EncryptionKeyMissingError,
  InvalidOptionError,
} from '../../src/index.js';

/** A store that seals its answers and erases by scope, in either mode. */
interface SealingStore extends LeasedIdempotencyStore<unknown> {
  erase(options: EraseOptions): MaybePromise<EraseResult>;
  rekey(options?: RekeyOptions): MaybePromise<RekeyResult>;
  sealingReport(options?: RekeyOptions): MaybePromise<SealingReport>;
}

/** A store of one dialect over one database that several stores (with several keyrings) share. */
export interface EncryptionHarness {
  /** Opens another store on the same table, with `encryption` when given. */
  open(encryption?: Keyring): Promise<SealingStore>;
  /** The response column of every row, as the database holds it, by id. */
  responses(): Promise<Map<string, string | null>>;
  /** Replaces the stored response of `id` with `value` behind the store's back. */
  overwrite(id: string, value: string): Promise<void>;
}

const key = () => new Uint8Array(randomBytes(32));
const k1 = key();
const k2 = key();
const ring1: Keyring = { keys: { k1 }, current: 'k1' };
const ring12: Keyring = { keys: { k1, k2 }, current: 'k2' };
const ring2: Keyring = { keys: { k2 }, current: 'k2' };
const SECRET = 'card 4242-4242-4242-4242, 1 Main Street';
const answer = { status: 201, body: SECRET, emoji: 'ü€😀' };

/**
 * Encryption at rest and erasure by scope on one dialect: `fresh` gives a harness over an empty
 * table for each test.
 */
export function encryptionSuite(name: string, fresh: () => Promise<EncryptionHarness>): void {
  describe(`encryption and erasure on ${name}`, () => {
    it('never stores the answer in plain text and replays it exactly', async () => {
      const harness = await fresh();
      const store = await harness.open(ring1);
      expect(await store.reserve('a', 'd', 100)).toBe(true);
      expect(await store.finish('a', 'd', answer)).toBe(true);
      const raw = (await harness.responses()).get('a');
      expect(raw).toMatch(/^\$aes256gcm:k1:/);
      expect(raw).not.toContain('4242');
      expect(raw).not.toContain('Main');
      expect(await store.fetch('a', 1)).toEqual(answer);
      expect(JSON.stringify(await store.fetch('a', 1))).toBe(JSON.stringify(answer));
      expect((await store.get('a'))?.response).toEqual(answer);
      await store.close();
    });

    it('keys the fingerprint through the claim engine, and replays without running again', async () => {
      const harness = await fresh();
      const store = await harness.open(ring1);
      const settings = resolveClaimOptions({ ttlSeconds: 60, now: () => 1 });
      const first = await claim(store, 'c', 'sha-of-body', settings);
      expect(first.status).toBe('acquired');
      if (first.status !== 'acquired') return;
      expect(first.ownership.owner.fingerprint).toMatch(/^hmac-sha256:k1:[0-9a-f]{64}$/);
      expect(await first.ownership.finish(answer)).toBe(true);
      const again = await claim(store, 'c', 'sha-of-body', settings);
      expect(again.status).toBe('replay');
      if (again.status === 'replay') expect(again.record.response).toEqual(answer);
      expect((await claim(store, 'c', 'other-body', settings)).status).toBe('mismatch');
      await store.close();
    });

    it('reads rows kept before encryption was turned on, and re-seals them with rekey', async () => {
      const harness = await fresh();
      const plain = await harness.open();
      await plain.reserve('p', 'old-digest', 100);
      await plain.finish('p', 'old-digest', answer);
      await plain.close();
      expect((await harness.responses()).get('p')).toBe(JSON.stringify(answer));
      const store = await harness.open(ring1);
      expect(await store.fetch('p', 1)).toEqual(answer);
      // The plain digest of the first request still matches its retry.
      const replay = await claim(
        store,
        'p',
        'old-digest',
        resolveClaimOptions({ ttlSeconds: 60, now: () => 1 }),
      );
      expect(replay.status).toBe('replay');
      expect(await store.sealingReport()).toMatchObject({ plaintext: 1, missing: [], retired: [] });
      expect(await store.rekey({ batchSize: 1 })).toEqual({
        resealed: 1,
        current: 0,
        unreadable: [],
      });
      expect((await harness.responses()).get('p')).toMatch(/^\$aes256gcm:k1:/);
      expect(await store.fetch('p', 1)).toEqual(answer);
      await store.close();
    });

    it('rotates keys: rekey moves every answer to the current key in batches', async () => {
      const harness = await fresh();
      const old = await harness.open(ring1);
      for (const id of ['r1', 'r2', 'r3']) {
        await old.reserve(id, 'd', 100);
        await old.finish(id, 'd', { id });
      }
      await old.reserve('r4', 'd', 100);
      await old.close();
      const store = await harness.open(ring12);
      expect(await store.sealingReport()).toEqual({
        plaintext: 0,
        byKey: { k1: 3 },
        current: 'k2',
        retired: ['k1'],
        missing: [],
      });
      expect(await store.rekey({ batchSize: 2 })).toEqual({
        resealed: 3,
        current: 0,
        unreadable: [],
      });
      expect(await store.rekey()).toEqual({ resealed: 0, current: 3, unreadable: [] });
      await store.close();
      const rotated = await harness.open(ring2);
      expect(await rotated.fetch('r2', 1)).toEqual({ id: 'r2' });
      expect((await rotated.sealingReport()).byKey).toEqual({ k2: 3 });
      await rotated.close();
    });

    it('answers a typed error, never garbage nor a second run, for a key id the keyring lacks', async () => {
      const harness = await fresh();
      const old = await harness.open(ring1);
      await old.reserve('m', 'd', 100);
      await old.finish('m', 'd', answer);
      await old.close();
      const store = await harness.open(ring2);
      await expect(Promise.resolve().then(() => store.fetch('m', 1))).rejects.toBeInstanceOf(
        EncryptionKeyMissingError,
      );
      const settings = resolveClaimOptions({ ttlSeconds: 60, now: () => 1 });
      await expect(claim(store, 'm', 'd', settings)).rejects.toMatchObject({
        keyId: 'k1',
      });
      expect(await store.rekey()).toEqual({ resealed: 0, current: 0, unreadable: ['m'] });
      expect((await store.sealingReport()).missing).toEqual(['k1']);
      // Still done, still the one answer: nothing claimed it again.
      expect(await store.counts()).toEqual({ pending: 0, done: 1 });
      await store.close();
      const unkeyed = await harness.open();
      await expect(Promise.resolve().then(() => unkeyed.fetch('m', 1))).rejects.toBeInstanceOf(
        EncryptionKeyMissingError,
      );
      await unkeyed.close();
    });

    it('refuses an answer moved to another row or altered', async () => {
      const harness = await fresh();
      const store = await harness.open(ring1);
      for (const id of ['x', 'y']) {
        await store.reserve(id, 'd', 100);
        await store.finish(id, 'd', { id });
      }
      const raw = await harness.responses();
      await harness.overwrite('y', raw.get('x') as string);
      await expect(Promise.resolve().then(() => store.fetch('y', 1))).rejects.toBeInstanceOf(
        AnswerUnreadableError,
      );
      await store.close();
    });

    it('erases every done answer of one scope in batches and lists its pending keys', async () => {
      const harness = await fresh();
      const store = await harness.open(ring1);
      for (const k of ['k1', 'k2', 'k3']) {
        await store.reserve(storedId('alice', k), 'd', 100);
        await store.finish(storedId('alice', k), 'd', { k });
      }
      await store.reserve(storedId('alice', 'k4'), 'd', 100);
      await store.reserve(storedId('alicia', 'k1'), 'd', 100);
      await store.finish(storedId('alicia', 'k1'), 'd', { k: 'other' });
      await store.reserve('k1', 'd', 100);
      await store.finish('k1', 'd', { k: 'unscoped' });
      expect(await store.erase({ scope: 'alice', batchSize: 2 })).toEqual({
        erased: ['k1', 'k2', 'k3'],
        pending: ['k4'],
      });
      expect([...(await harness.responses()).keys()].sort()).toEqual(
        [storedId('alice', 'k4'), storedId('alicia', 'k1'), 'k1'].sort(),
      );
      // A retry of an erased key is a new request.
      expect(await store.reserve(storedId('alice', 'k2'), 'd', 200)).toBe(true);
      expect(await store.erase({ scope: 'nobody' })).toEqual({ erased: [], pending: [] });
      await expect(Promise.resolve().then(() => store.erase({ scope: '' }))).rejects.toBeInstanceOf(
        InvalidOptionError,
      );
      await store.close();
    });

    it('refuses a bad keyring before anything is opened', async () => {
      const harness = await fresh();
      const bad: unknown[] = [
        { keys: { k1: new Uint8Array(16) }, current: 'k1' },
        { keys: { k1 }, current: 'k9' },
        { keys: { 'bad id': k1 }, current: 'bad id' },
      ];
      for (const ring of bad) {
        await expect(harness.open(ring as Keyring)).rejects.toBeInstanceOf(InvalidOptionError);
      }
    });
  });
}
