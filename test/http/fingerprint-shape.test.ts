import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import type { IdempotentOptions } from '../../src/http/index.js';
import { InvalidOptionError } from '../../src/index.js';
import { openSqliteStore } from '../../src/sqlite/index.js';
import { serverKinds } from '../support/http-servers.js';
import { nestServerKinds } from '../support/nest-servers.js';
import { freshDbPath, tempDir } from '../support/temp.js';

const dir = tempDir('idem-http-fingerprint-');
const keyring = { keys: { k1: new Uint8Array(randomBytes(32)) }, current: 'k1' };

interface Problem {
  readonly status: number;
  readonly type: string;
  readonly detail: string;
  readonly differentMembers?: string[];
  readonly membersCapped?: boolean;
}

describe.each([...serverKinds, ...nestServerKinds])('fingerprints on the $name', (kind) => {
  async function serve(options: IdempotentOptions, encrypted = false) {
    const path = freshDbPath(dir);
    const store = openSqliteStore(path, encrypted ? { encryption: keyring } : {});
    let runs = 0;
    const server = await kind.start(store, options, async () => {
      runs++;
      return { status: 201, headers: {}, kind: 'json', body: { payment: runs } };
    });
    const pay = (body: unknown, key = 'pay-1') =>
      fetch(`${server.url}/run`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'idempotency-key': key },
        body: JSON.stringify(body),
      });
    return {
      store,
      pay,
      runs: () => runs,
      close: async () => {
        await server.close();
        store.close();
      },
    };
  }

  const first = {
    amount: 1250,
    currency: 'EUR',
    sentAt: '2026-12-03T10:00:00Z',
    meta: { traceId: 'trace-a', channel: 'web' },
  };

  it('replays a retry that differs only in the ignored members', async () => {
    const app = await serve({ fingerprint: { ignore: ['/sentAt', '/meta/traceId'] } });
    try {
      expect((await app.pay(first)).status).toBe(201);
      const retry = await app.pay({
        ...first,
        sentAt: '2026-12-03T10:00:05Z',
        meta: { traceId: 'trace-b', channel: 'web' },
      });
      expect(retry.status).toBe(201);
      expect(retry.headers.get('idempotent-replayed')).toBe('true');
      expect(await retry.json()).toEqual({ payment: 1 });
      // A member the list does not name still counts: /meta/channel is part of the request.
      const other = await app.pay({ ...first, meta: { traceId: 'trace-a', channel: 'app' } });
      expect(other.status).toBe(422);
      expect(((await other.json()) as Problem).differentMembers).toEqual(['meta']);
      expect(app.runs()).toBe(1);
    } finally {
      await app.close();
    }
  });

  it('names the top-level members that differ, never their values', async () => {
    const app = await serve({});
    try {
      expect((await app.pay(first)).status).toBe(201);
      const { currency: _left, ...rest } = first;
      const reused = await app.pay({ ...rest, amount: 99_999, note: 'gift-wrap' });
      expect(reused.status).toBe(422);
      const text = await reused.text();
      const problem = JSON.parse(text) as Problem;
      expect(problem.type).toBe('urn:drizzle-idempotency:problem:key-reused');
      expect(problem.differentMembers).toEqual(['amount', 'currency', 'note']);
      expect(problem.membersCapped).toBeUndefined();
      expect(problem.detail).toContain('"amount", "currency", "note"');
      for (const value of ['99999', '1250', 'EUR', 'gift-wrap', 'trace-a']) {
        expect(text).not.toContain(value);
      }
      expect(app.runs()).toBe(1);
    } finally {
      await app.close();
    }
  });

  it('names them with encryption on, from keyed member digests', async () => {
    const app = await serve({ fingerprint: { ignore: ['/sentAt'] } }, true);
    try {
      expect((await app.pay(first)).status).toBe(201);
      const kept = app.store.get('pay-1')?.fingerprint ?? '';
      expect(kept).toMatch(/^hmac-sha256:k1:[0-9a-f]{64} \{"members":\{"amount":"[0-9a-f]{16}"/);
      const retry = await app.pay({ ...first, sentAt: 'later' });
      expect(retry.headers.get('idempotent-replayed')).toBe('true');
      const reused = await app.pay({ ...first, currency: 'USD' });
      expect(reused.status).toBe(422);
      expect(((await reused.json()) as Problem).differentMembers).toEqual(['currency']);
      expect(app.runs()).toBe(1);
    } finally {
      await app.close();
    }
  });

  it('caps the members it compares, and says so', async () => {
    const app = await serve({});
    try {
      const many = Object.fromEntries(
        Array.from({ length: 40 }, (_, index) => [`m${String(index).padStart(2, '0')}`, index]),
      );
      expect((await app.pay(many)).status).toBe(201);
      const reused = await app.pay({ ...many, m01: 'changed', m39: 'changed' });
      expect(reused.status).toBe(422);
      const problem = (await reused.json()) as Problem;
      // m39 sorts past the 32 members kept: it differs, but is not compared.
      expect(problem.differentMembers).toEqual(['m01']);
      expect(problem.membersCapped).toBe(true);
      expect(problem.detail).toContain('only the first ones by name are compared');
    } finally {
      await app.close();
    }
  });

  it('refuses an ignore list that is not JSON pointers when it is built, naming the pointer', async () => {
    const store = openSqliteStore(freshDbPath(dir));
    try {
      for (const [ignore, named] of [
        [['meta/traceId'], 'meta/traceId'],
        [['/ok', '/bad~2'], '/bad~2'],
        [[''], '""'],
      ] as const) {
        const started = kind.start(store, { fingerprint: { ignore } }, async () => {
          throw new Error('never runs');
        });
        const error = await started.then(
          async (server) => {
            await server.close();
            return undefined;
          },
          (caught: unknown) => caught,
        );
        expect(error).toBeInstanceOf(InvalidOptionError);
        expect((error as Error).message).toContain(named);
      }
    } finally {
      store.close();
    }
  });
});
