import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { Encryption, type Keyring } from '../../src/core/encryption.js';
import { KeyReusedError, makeIdempotent, payloadFingerprint } from '../../src/function/index.js';
import { idempotent, requestFingerprint } from '../../src/http/index.js';
import { InvalidOptionError } from '../../src/index.js';
import { openSqliteStore } from '../../src/sqlite/index.js';
import { freshDbPath, tempDir } from '../support/temp.js';

const dir = tempDir('idem-function-fingerprint-');
const k1 = new Uint8Array(randomBytes(32));
const k2 = new Uint8Array(randomBytes(32));
const ring1: Keyring = { keys: { k1 }, current: 'k1' };
const ring12: Keyring = { keys: { k1, k2 }, current: 'k2' };

interface Order {
  readonly id: string;
  readonly amount: number;
  readonly currency: string;
  readonly meta: { readonly traceId: string };
}

const order: Order = { id: 'o-1', amount: 10, currency: 'EUR', meta: { traceId: 't-1' } };

function charger(path: string, encryption?: Keyring) {
  const store = openSqliteStore(path, encryption === undefined ? {} : { encryption });
  let runs = 0;
  const charge = makeIdempotent(
    async (payment: Order) => {
      runs++;
      return { charged: payment.amount, run: runs };
    },
    {
      store,
      key: (payment) => payment.id,
      payload: (payment) => payment,
      fingerprint: { ignore: ['/meta/traceId'] },
    },
  );
  return { store, charge, runs: () => runs };
}

describe('makeIdempotent fingerprints shaped by ignore', () => {
  it('replays a call that differs only in ignored members, and names the members that differ', async () => {
    const { store, charge, runs } = charger(freshDbPath(dir));
    expect(await charge(order)).toEqual({ charged: 10, run: 1 });
    expect(await charge({ ...order, meta: { traceId: 't-2' } })).toEqual({ charged: 10, run: 1 });
    const error = await charge({ ...order, amount: 11, currency: 'USD' }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(KeyReusedError);
    expect((error as KeyReusedError).members).toEqual({
      names: ['amount', 'currency'],
      capped: false,
    });
    expect((error as KeyReusedError).message).toContain('"amount", "currency"');
    expect((error as KeyReusedError).message).not.toContain('USD');
    expect(runs()).toBe(1);
    store.close();
  });

  it('refuses an ignore list that is not JSON pointers when the wrapper is made', () => {
    const store = openSqliteStore(freshDbPath(dir));
    for (const fingerprint of [{ ignore: ['traceId'] }, { ignore: '/a' }, 'x']) {
      expect(() =>
        makeIdempotent(async () => 1, { store, key: () => 'k', fingerprint: fingerprint as never }),
      ).toThrow(InvalidOptionError);
    }
    expect(() =>
      makeIdempotent(async () => 1, {
        store,
        key: () => 'k',
        fingerprint: { ignore: ['/ok', 'bad'] },
      }),
    ).toThrow('"bad"');
    store.close();
  });

  it('replays a result kept by a release without member digests', async () => {
    const path = freshDbPath(dir);
    const old = openSqliteStore(path);
    // What the previous release kept: the payload's digest alone (nothing was ignored then).
    const bare = { id: order.id, amount: order.amount, currency: order.currency, meta: {} };
    const digest = payloadFingerprint(bare);
    expect(old.reserve('o-1', digest, Date.now() / 1000 + 60)).toBe(true);
    expect(old.finish('o-1', digest, { value: { charged: 10, run: 0 } })).toBe(true);
    old.close();
    const { store, charge, runs } = charger(path);
    expect(await charge(order)).toEqual({ charged: 10, run: 0 });
    expect(runs()).toBe(0);
    store.close();
  });

  it('keys member digests under the keyring, and compares them after a rotation', async () => {
    const path = freshDbPath(dir);
    const before = charger(path, ring1);
    expect(await before.charge(order)).toEqual({ charged: 10, run: 1 });
    const kept = before.store.get('o-1')?.fingerprint ?? '';
    expect(kept).toMatch(/^hmac-sha256:k1:[0-9a-f]{64} \{"members":\{/);
    // The member digests are keyed: the plain digest of a member's value appears nowhere.
    const plainAmount = payloadFingerprint(10);
    expect(kept).not.toContain(plainAmount.slice(-16));
    before.store.close();
    const after = charger(path, ring12);
    expect(await after.charge({ ...order, meta: { traceId: 't-9' } })).toEqual({
      charged: 10,
      run: 1,
    });
    const error = await after.charge({ ...order, currency: 'USD' }).catch((e: unknown) => e);
    expect((error as KeyReusedError).members?.names).toEqual(['currency']);
    expect(after.runs()).toBe(0);
    after.store.close();
  });

  it('replays a keyed row kept by a release without member digests', async () => {
    const path = freshDbPath(dir);
    const old = openSqliteStore(path, { encryption: ring1 });
    const bare = { id: order.id, amount: order.amount, currency: order.currency, meta: {} };
    const keyed = await new Encryption(ring1).fingerprint(payloadFingerprint(bare));
    expect(old.reserve('o-1', keyed, Date.now() / 1000 + 60)).toBe(true);
    expect(old.finish('o-1', keyed, { value: { charged: 10, run: 0 } })).toBe(true);
    old.close();
    const { store, charge, runs } = charger(path, ring1);
    expect(await charge(order)).toEqual({ charged: 10, run: 0 });
    expect(runs()).toBe(0);
    store.close();
  });
});

describe('the HTTP layer with ignore and a body that is not JSON', () => {
  it('digests the bytes as they are, whatever the list says', async () => {
    const store = openSqliteStore(freshDbPath(dir));
    const layer = idempotent(store, { fingerprint: { ignore: ['/sentAt'] } });
    const request = (body: string) => ({
      method: 'POST',
      path: '/upload',
      headers: { 'idempotency-key': 'u-1' },
      body: new TextEncoder().encode(body),
    });
    const handler = () => ({ status: 201, body: { ok: true } });
    expect((await layer.handle(request('sentAt=1'), handler)).outcome).toBe('executed');
    const kept = store.get('u-1')?.fingerprint;
    expect(kept).toBe(requestFingerprint(request('sentAt=1')));
    const reused = await layer.handle(request('sentAt=2'), handler);
    expect(reused.outcome).toBe('problem');
    expect(reused.response.status).toBe(422);
    expect(reused.response.body).not.toHaveProperty('differentMembers');
    store.close();
  });
});
