import { setTimeout as sleep } from 'node:timers/promises';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import {
  type IdempotentOptions,
  MAX_KEY_LENGTH,
  requestFingerprint,
  storedId,
} from '../../src/http/index.js';
import {
  type LeasedIdempotencyStore,
  MAX_KEY_BYTES,
  OutcomeUnknownError,
  resolveUnknownOutcome,
} from '../../src/index.js';
import { countedStore } from '../support/counted-store.js';
import { failingFinish } from '../support/failing-store.js';
import {
  type Answer,
  type Behaviour,
  type ServerKind,
  serverKinds,
  type TestServer,
} from '../support/http-servers.js';
import { nestServerKinds } from '../support/nest-servers.js';
import { type StoreFactory, storeFactories } from '../support/store-factories.js';
import { until, watched } from '../support/waiting.js';

/** Fields of a request body that steer the test handler. */
interface Control {
  throw?: boolean;
  unknown?: boolean;
  status?: number;
  text?: boolean;
  binary?: boolean;
  gate?: boolean;
  delay_ms?: number;
  sabotage?: string;
}

interface Problem {
  type: string;
  title: string;
  status: number;
  detail: string;
}

const factories = storeFactories('behaviour');

/** Every byte value once, 0x00 to 0xFF: a body no text or JSON encoding can carry. */
const ALL_BYTES = Uint8Array.from({ length: 256 }, (_, index) => index);

function defer(): { promise: Promise<void>; open: () => void } {
  let open = () => {};
  const promise = new Promise<void>((resolve) => {
    open = resolve;
  });
  return { promise, open };
}

function describeHttpBehaviour(kind: ServerKind, factory: StoreFactory): void {
  describe(`HTTP idempotency: ${kind.name} on ${factory.name}`, () => {
    let store: LeasedIdempotencyStore<unknown>;
    let closeStore: () => Promise<void>;
    let server: TestServer | undefined;
    let calls: number;
    let gate: ReturnType<typeof defer>;
    let clock: number;

    const behave: Behaviour = async (body, path): Promise<Answer> => {
      calls += 1;
      const n = calls;
      const control = (body ?? {}) as Control;
      if (control.gate) await gate.promise;
      if (control.delay_ms) await sleep(control.delay_ms);
      if (control.sabotage) {
        const record = await store.get(control.sabotage);
        if (record) await store.release(control.sabotage, record.fingerprint);
      }
      if (control.throw) throw new Error('boom');
      if (control.unknown) throw new OutcomeUnknownError('the charge timed out');
      if (control.text) {
        return {
          status: 200,
          headers: { 'content-type': 'text/plain; charset=utf-8' },
          kind: 'text',
          body: `hello ${n}`,
        };
      }
      if (control.binary) {
        return {
          status: 200,
          headers: { 'content-type': 'application/octet-stream' },
          kind: 'binary',
          body: ALL_BYTES,
        };
      }
      return {
        status: control.status ?? 201,
        headers: { location: `/things/${n}`, 'x-extra': 'not stored' },
        kind: 'json',
        body: { n, path, body: body ?? null },
      };
    };

    async function start(
      options: IdempotentOptions = {},
      through: LeasedIdempotencyStore<unknown> = store,
    ): Promise<string> {
      server = await kind.start(through, { now: () => clock, ...options }, behave);
      return server.url;
    }

    async function send(
      url: string,
      key: string | undefined,
      body: unknown,
      init: {
        path?: string;
        method?: string;
        headers?: Record<string, string>;
        raw?: string | Uint8Array;
      } = {},
    ): Promise<Response> {
      const headers: Record<string, string> = {
        'content-type': 'application/json',
        ...init.headers,
      };
      if (key !== undefined) headers['idempotency-key'] = key;
      return fetch(`${url}${init.path ?? '/run'}`, {
        method: init.method ?? 'POST',
        headers,
        body: init.raw ?? (body === undefined ? undefined : JSON.stringify(body)),
      });
    }

    // Sends JSON text exactly as written (what a client library in another language may send).
    function sendText(url: string, key: string, text: string, path = '/run'): Promise<Response> {
      return send(url, key, undefined, { raw: text, path });
    }

    async function expectProblem(
      response: Response,
      status: number,
      type: string,
    ): Promise<Problem> {
      expect(response.status).toBe(status);
      expect(response.headers.get('content-type')).toMatch(/^application\/problem\+json/);
      expect(response.headers.get('idempotent-replayed')).toBeNull();
      const problem = (await response.json()) as Problem;
      expect(problem).toEqual({
        type: `urn:drizzle-idempotency:problem:${type}`,
        title: expect.any(String),
        status,
        detail: expect.any(String),
      });
      return problem;
    }

    beforeEach(async () => {
      ({ store, close: closeStore } = await factory.open());
      calls = 0;
      gate = defer();
      clock = 1_000;
    });

    afterEach(async () => {
      gate.open();
      await server?.close();
      server = undefined;
      await closeStore();
    });

    it('runs a new key once, stores the answer, and replays it with Idempotent-Replayed', async () => {
      const url = await start();
      const first = await send(url, 'k1', { amount: 1 });
      expect(first.status).toBe(201);
      expect(first.headers.get('idempotent-replayed')).toBeNull();
      expect(first.headers.get('location')).toBe('/things/1');
      expect(first.headers.get('x-extra')).toBe('not stored');
      const firstBody = await first.json();
      expect(firstBody).toEqual({ n: 1, path: '/run', body: { amount: 1 } });

      const retry = await send(url, 'k1', { amount: 1 });
      expect(retry.status).toBe(201);
      expect(retry.headers.get('idempotent-replayed')).toBe('true');
      expect(retry.headers.get('location')).toBe('/things/1');
      expect(retry.headers.get('content-type')).toMatch(/^application\/json/);
      expect(retry.headers.get('x-extra')).toBeNull();
      expect(await retry.json()).toEqual(firstBody);
      expect(calls).toBe(1);

      const record = await store.get('k1');
      expect(record?.status).toBe('done');
      expect(record?.expires).toBe(1_000 + 24 * 3600);
    });

    it('replays a body whose JSON keys come in another order', async () => {
      const url = await start();
      await send(url, 'k1', { amount: 1, currency: 'EUR', meta: { a: 1, b: [1, 2] } });
      const retry = await send(url, 'k1', {
        meta: { b: [1, 2], a: 1 },
        currency: 'EUR',
        amount: 1.0,
      });
      expect(retry.status).toBe(201);
      expect(retry.headers.get('idempotent-replayed')).toBe('true');
      expect(calls).toBe(1);
    });

    it('answers 422 for the same key with another body or path, without running', async () => {
      const url = await start();
      await send(url, 'k1', { amount: 1 });
      await expectProblem(await send(url, 'k1', { amount: 2 }), 422, 'key-reused');
      await expectProblem(
        await send(url, 'k1', { amount: 1 }, { path: '/other' }),
        422,
        'key-reused',
      );
      await expectProblem(
        await send(url, 'k1', { amount: 1 }, { method: 'PATCH' }),
        422,
        'key-reused',
      );
      expect(calls).toBe(1);
      expect((await store.get('k1'))?.status).toBe('done');
    });

    it('tells apart JSON bodies a parser reads alike: digits beyond a double, a member sent twice', async () => {
      const url = await start();
      const pairs: [string, string, string][] = [
        ['big', '{"acct":12345678901234567891}', '{"acct":12345678901234567892}'],
        ['fine', '{"amt":0.30000000000000000001}', '{"amt":0.3}'],
        ['twice', '{"amt":1,"amt":2}', '{"amt":2}'],
        ['order', '{"amt":1,"amt":2}', '{"amt":2,"amt":1}'],
      ];
      for (const [key, first, other] of pairs) {
        expect((await sendText(url, key, first)).status).toBe(201);
        await expectProblem(await sendText(url, key, other), 422, 'key-reused');
      }
      // The same text in another layout, or with the same number spelt another way, is a retry.
      const spaced = await sendText(url, 'big', '{ "acct" : 12345678901234567891 }');
      expect(spaced.headers.get('idempotent-replayed')).toBe('true');
      const spelt = await sendText(url, 'fine', '{"amt":3.0000000000000000001e-1}');
      expect(spelt.headers.get('idempotent-replayed')).toBe('true');
      expect(calls).toBe(4);
    });

    it('accepts a number beyond double range as written, such as 1e400', async () => {
      const url = await start();
      expect((await sendText(url, 'huge', '{"a":1e400}')).status).toBe(201);
      const again = await sendText(url, 'huge', '{"a":10E+399}');
      expect(again.headers.get('idempotent-replayed')).toBe('true');
      await expectProblem(await sendText(url, 'huge', '{"a":1e401}'), 422, 'key-reused');
      expect(calls).toBe(1);
    });

    it('ignores a byte order mark before a JSON body, on every adapter alike', async () => {
      const url = await start();
      expect((await sendText(url, 'bom', '{"amount":1}')).status).toBe(201);
      const marked = Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from('{"amount":1}')]);
      const retry = await send(url, 'bom', undefined, { raw: marked });
      expect(retry.status).toBe(201);
      expect(retry.headers.get('idempotent-replayed')).toBe('true');
      expect(calls).toBe(1);
    });

    it('compares paths as RFC 3986 normalises them: /things/p%61y is /things/pay', async () => {
      const url = await start();
      expect((await send(url, 'path', { amount: 1 }, { path: '/things/p%61y' })).status).toBe(201);
      const plain = await send(url, 'path', { amount: 1 }, { path: '/things/pay' });
      expect(plain.headers.get('idempotent-replayed')).toBe('true');
      const hex = await send(url, 'path', { amount: 1 }, { path: '/things/%70ay' });
      expect(hex.headers.get('idempotent-replayed')).toBe('true');
      expect((await send(url, 'kept', { amount: 1 }, { path: '/things/a%2fb' })).status).toBe(201);
      const upper = await send(url, 'kept', { amount: 1 }, { path: '/things/a%2Fb' });
      expect(upper.headers.get('idempotent-replayed')).toBe('true');
      await expectProblem(
        await send(url, 'kept', { amount: 1 }, { path: '/things/a%252Fb' }),
        422,
        'key-reused',
      );
      expect(calls).toBe(2);
    });

    it('answers 400 scope-malformed, not 500, when the scope read from the request is empty', async () => {
      const url = await start();
      const empty = await send(url, 'k1', { amount: 1 }, { headers: { 'x-client': '' } });
      const problem = await expectProblem(empty, 400, 'scope-malformed');
      expect(problem.detail).not.toMatch(/\bat .*:\d+:\d+|node_modules|\/src\//);
      expect(calls).toBe(0);
      expect(await store.counts()).toEqual({ pending: 0, done: 0 });
    });

    it('answers 400 for a missing key where required, and passes through where not', async () => {
      const url = await start();
      await expectProblem(await send(url, undefined, { amount: 1 }), 400, 'key-missing');
      expect(calls).toBe(0);
      await server?.close();
      const open = await start({ required: false });
      expect((await send(open, undefined, { amount: 1 })).status).toBe(201);
      expect((await send(open, undefined, { amount: 1 })).status).toBe(201);
      expect(calls).toBe(2);
      expect(await store.counts()).toEqual({ pending: 0, done: 0 });
    });

    it('passes methods it does not cover straight through, key or not', async () => {
      const url = await start();
      const get = await fetch(`${url}/run`, { headers: { 'idempotency-key': 'k1' } });
      expect(get.status).toBe(201);
      await fetch(`${url}/run`, { headers: { 'idempotency-key': 'k1' } });
      expect(calls).toBe(2);
      expect(await store.get('k1')).toBeNull();
    });

    it('refuses malformed keys with 400 and stores nothing', async () => {
      const url = await start();
      const bad = [
        '',
        'two words',
        '"unterminated',
        '"a"b"',
        '"a";p=1',
        '"bad\\escape"',
        'caf\u00e9',
        'k'.repeat(MAX_KEY_LENGTH + 1),
        `"${'k'.repeat(MAX_KEY_LENGTH + 1)}"`,
        '""',
      ];
      for (const key of bad) {
        await expectProblem(await send(url, key, { amount: 1 }), 400, 'key-malformed');
      }
      const twice = new Headers({ 'content-type': 'application/json' });
      twice.append('idempotency-key', 'a');
      twice.append('idempotency-key', 'b');
      const duplicate = await fetch(`${url}/run`, { method: 'POST', headers: twice, body: '{}' });
      await expectProblem(duplicate, 400, 'key-malformed');
      // Lines that would join into a key that parses: a trailing empty line, a quoted key split
      // over two lines. Fetch sends them joined with ", ", as a proxy may.
      for (const lines of [
        ['k1', ''],
        ['"a', 'b"'],
      ]) {
        const headers = new Headers({ 'content-type': 'application/json' });
        for (const line of lines) headers.append('idempotency-key', line);
        const joined = await fetch(`${url}/run`, { method: 'POST', headers, body: '{}' });
        await expectProblem(joined, 400, 'key-malformed');
      }
      expect(calls).toBe(0);
      expect(await store.counts()).toEqual({ pending: 0, done: 0 });
    });

    it('accepts the quoted and the bare form as one key, up to 255 characters', async () => {
      const url = await start();
      expect((await send(url, '"order-42"', { amount: 1 })).status).toBe(201);
      const bare = await send(url, 'order-42', { amount: 1 });
      expect(bare.headers.get('idempotent-replayed')).toBe('true');
      expect((await send(url, '"with space \\"and\\" \\\\ escapes"', { a: 1 })).status).toBe(201);
      expect(await store.get('with space "and" \\ escapes')).not.toBeNull();
      expect((await send(url, 'k'.repeat(MAX_KEY_LENGTH), { a: 1 })).status).toBe(201);
      expect(calls).toBe(3);
    });

    it('answers 409 with a Retry-After of the lease left while the first request runs, and never runs twice', async () => {
      const url = await start({ leaseSeconds: 20 });
      const first = send(url, 'k1', { gate: true });
      await until(async () => (await store.get('k1'))?.status === 'pending');
      const second = await send(url, 'k1', { gate: true });
      await expectProblem(second, 409, 'request-in-progress');
      expect(second.headers.get('retry-after')).toBe('20');
      gate.open();
      expect((await first).status).toBe(201);
      const third = await send(url, 'k1', { gate: true });
      expect(third.headers.get('idempotent-replayed')).toBe('true');
      expect(calls).toBe(1);
    });

    it('waits for the first request and replays its answer in wait mode', async () => {
      const counted = countedStore(store);
      const url = await start({ wait: { timeoutMs: 10_000, intervalMs: 10 } }, counted.store);
      const first = send(url, 'k1', { gate: true });
      await until(async () => (await store.get('k1'))?.status === 'pending');
      const second = watched(send(url, 'k1', { gate: true }));
      // The second request claimed once and then read the row again and again without answering:
      // it is waiting, not replaying; its answer comes only once the first is released.
      await until(() => counted.calls('get') >= 3 || second.settled());
      expect(second.settled()).toBe(false);
      expect(counted.calls('acquire')).toBe(2);
      gate.open();
      const [a, b] = await Promise.all([first, second.promise]);
      expect(a.status).toBe(201);
      expect(b.status).toBe(201);
      expect(b.headers.get('idempotent-replayed')).toBe('true');
      expect(await b.json()).toEqual(await a.json());
      expect(calls).toBe(1);
    });

    it('gives up waiting after the bounded wait with 409', async () => {
      const counted = countedStore(store);
      // Long enough that the claim before the wait never spends the whole budget on a busy server.
      const url = await start({ wait: { timeoutMs: 500, intervalMs: 10 } }, counted.store);
      const first = send(url, 'k1', { gate: true });
      await until(async () => (await store.get('k1'))?.status === 'pending');
      await expectProblem(await send(url, 'k1', { gate: true }), 409, 'request-in-progress');
      // It waited (read the row) before giving up.
      expect(counted.calls('get')).toBeGreaterThanOrEqual(1);
      gate.open();
      await first;
    });

    it('neither replays nor runs an expired answer awaiting purge; after the sweep the key is new', async () => {
      const url = await start({ ttlSeconds: 10 });
      const first = await (await send(url, 'k1', { amount: 1 })).json();
      clock = 1_009.5;
      expect((await send(url, 'k1', { amount: 1 })).headers.get('idempotent-replayed')).toBe(
        'true',
      );
      clock = 1_010;
      const expired = await send(url, 'k1', { amount: 1 });
      await expectProblem(expired, 409, 'answer-expired');
      expect(expired.headers.get('retry-after')).toBeNull();
      expect(calls).toBe(1);
      expect(await store.sweepBatch(clock, 100)).toBe(1);
      const fresh = await send(url, 'k1', { amount: 1 });
      expect(fresh.status).toBe(201);
      expect(fresh.headers.get('idempotent-replayed')).toBeNull();
      expect(await fresh.json()).not.toEqual(first);
      expect(calls).toBe(2);
      expect((await store.get('k1'))?.expires).toBe(1_020);
    });

    it('releases only the key it owns when the handler throws', async () => {
      const url = await start();
      await store.reserve('other', 'x', 5);
      const failed = await send(url, 'k1', { throw: true });
      expect(failed.status).toBe(500);
      expect(failed.headers.get('idempotent-replayed')).toBeNull();
      expect(await store.get('k1')).toBeNull();
      expect((await store.get('other'))?.status).toBe('pending');
      expect(calls).toBe(1);
    });

    it('runs a retry after a failure exactly once', async () => {
      const url = await start();
      await send(url, 'k1', { throw: true });
      await send(url, 'k2', { amount: 1 });
      expect((await send(url, 'k1', { amount: 1 })).status).toBe(201);
      expect((await send(url, 'k1', { amount: 1 })).headers.get('idempotent-replayed')).toBe(
        'true',
      );
      expect(calls).toBe(3);
    });

    it('does not store 5xx answers by default, and stores them when told to', async () => {
      const url = await start();
      const unavailable = await send(url, 'k1', { status: 503 });
      expect(unavailable.status).toBe(503);
      expect(await store.get('k1')).toBeNull();
      expect(
        (await send(url, 'k1', { status: 503 })).headers.get('idempotent-replayed'),
      ).toBeNull();
      expect(calls).toBe(2);
      await server?.close();
      const storing = await start({ shouldStore: () => true });
      await send(storing, 'k2', { status: 503 });
      const replay = await send(storing, 'k2', { status: 503 });
      expect(replay.status).toBe(503);
      expect(replay.headers.get('idempotent-replayed')).toBe('true');
      expect(calls).toBe(3);
    });

    it('stores and replays 4xx answers of the handler', async () => {
      const url = await start();
      expect((await send(url, 'k1', { status: 402 })).status).toBe(402);
      const replay = await send(url, 'k1', { status: 402 });
      expect(replay.status).toBe(402);
      expect(replay.headers.get('idempotent-replayed')).toBe('true');
      expect(calls).toBe(1);
    });

    it('stores and replays text answers', async () => {
      const url = await start();
      expect(await (await send(url, 'k1', { text: true })).text()).toBe('hello 1');
      const replay = await send(url, 'k1', { text: true });
      expect(replay.headers.get('content-type')).toBe('text/plain; charset=utf-8');
      expect(await replay.text()).toBe('hello 1');
      expect(calls).toBe(1);
    });

    it('stores a binary answer as base64 and replays it byte for byte', async () => {
      const url = await start();
      const first = await send(url, 'k1', { binary: true });
      expect(first.status).toBe(200);
      expect(first.headers.get('content-type')).toBe('application/octet-stream');
      expect(new Uint8Array(await first.arrayBuffer())).toEqual(ALL_BYTES);

      const retry = await send(url, 'k1', { binary: true });
      expect(retry.status).toBe(200);
      expect(retry.headers.get('idempotent-replayed')).toBe('true');
      expect(retry.headers.get('content-type')).toBe('application/octet-stream');
      expect(new Uint8Array(await retry.arrayBuffer())).toEqual(ALL_BYTES);
      expect(calls).toBe(1);
      expect((await store.get('k1'))?.response).toMatchObject({
        status: 200,
        headers: { 'content-type': 'application/octet-stream' },
        body: Buffer.from(ALL_BYTES).toString('base64'),
        encoding: 'base64',
      });
    });

    it('keeps the key pending when recording the answer fails, so a retry never runs it again', async () => {
      const url = await start({}, failingFinish(store));
      await expectProblem(await send(url, 'k1', { amount: 1 }), 500, 'answer-not-recorded');
      expect(calls).toBe(1);
      const record = await store.get('k1');
      expect(record?.status).toBe('pending');
      expect(record?.fingerprint).toBe(
        requestFingerprint({ method: 'POST', path: '/run', headers: {}, body: { amount: 1 } }),
      );
      const retry = await send(url, 'k1', { amount: 1 });
      // Held for an operator: the handler ran, and whether its effect stands is for them to say.
      await expectProblem(retry, 409, 'outcome-unknown');
      expect(calls).toBe(1);
      expect((await store.get('k1'))?.status).toBe('pending');
    });

    it('still releases the key when the handler fails, whatever finish would do', async () => {
      const url = await start({}, failingFinish(store));
      expect((await send(url, 'k1', { throw: true })).status).toBe(500);
      expect(await store.get('k1')).toBeNull();
      expect((await send(url, 'k2', { status: 503 })).status).toBe(503);
      expect(await store.get('k2')).toBeNull();
      expect(calls).toBe(2);
    });

    it('surfaces a finish that finds its row gone as 500 answer-not-recorded', async () => {
      const url = await start();
      await expectProblem(await send(url, 'k1', { sabotage: 'k1' }), 500, 'answer-not-recorded');
      expect(await store.get('k1')).toBeNull();
    });

    it('keeps scopes apart: one client never replays another client answer', async () => {
      const url = await start();
      const a = await send(url, 'k1', { amount: 1 }, { headers: { 'x-client': 'alice' } });
      const b = await send(url, 'k1', { amount: 1 }, { headers: { 'x-client': 'bob' } });
      expect(b.headers.get('idempotent-replayed')).toBeNull();
      expect(await b.json()).not.toEqual(await a.json());
      const unscoped = await send(url, 'k1', { amount: 1 });
      expect(unscoped.headers.get('idempotent-replayed')).toBeNull();
      const again = await send(url, 'k1', { amount: 1 }, { headers: { 'x-client': 'alice' } });
      expect(again.headers.get('idempotent-replayed')).toBe('true');
      expect(calls).toBe(3);
      expect(await store.get(storedId('alice', 'k1'))).not.toBeNull();

      const ab = await send(url, 'c', { amount: 1 }, { headers: { 'x-client': 'a:b' } });
      const a2 = await send(url, 'b:c', { amount: 1 }, { headers: { 'x-client': 'a' } });
      expect(ab.headers.get('idempotent-replayed')).toBeNull();
      expect(a2.headers.get('idempotent-replayed')).toBeNull();
      expect(calls).toBe(5);
    });

    it('holds a key whose handler declared its outcome unknown: 409 outcome-unknown, never a re-run, until settled', async () => {
      const url = await start();
      const first = await send(url, 'k1', { unknown: true });
      expect(first.status).toBe(500);
      expect(await store.counts()).toEqual({ pending: 1, done: 0 });
      for (let retry = 0; retry < 2; retry++) {
        const problem = await expectProblem(
          await send(url, 'k1', { unknown: true }),
          409,
          'outcome-unknown',
        );
        expect(JSON.stringify(problem)).not.toContain('timed out');
      }
      expect(calls).toBe(1);
      // The operator found the charge went through, and stores the answer it had.
      const answer = {
        wire: 1,
        status: 201,
        headers: { 'content-type': 'application/json' },
        body: '{"charged":true}',
      };
      expect(await resolveUnknownOutcome(store as never, 'k1', answer)).toBe('resolved');
      const replay = await send(url, 'k1', { unknown: true });
      expect(replay.status).toBe(201);
      expect(replay.headers.get('idempotent-replayed')).toBe('true');
      expect(await replay.json()).toEqual({ charged: true });
      // Another key declared unknown, then released: the next retry runs.
      await send(url, 'k2', { unknown: true });
      await expectProblem(await send(url, 'k2', { unknown: true }), 409, 'outcome-unknown');
      const held = await store.get('k2');
      expect(held?.status).toBe('pending');
      await store.release('k2', held?.fingerprint ?? '');
      expect((await send(url, 'k2', { amount: 1 })).status).toBe(201);
      expect(calls).toBe(3);
    });

    it('lets no scope block or refuse another: a key in flight or with another body elsewhere runs here', async () => {
      const url = await start();
      const alice = { headers: { 'x-client': 'alice' } };
      const bob = { headers: { 'x-client': 'bob' } };
      const first = send(url, 'k1', { gate: true }, alice);
      await until(async () => (await store.get(storedId('alice', 'k1')))?.status === 'pending');
      // Alice's request is in flight: Bob's same key with another body neither waits on it (409)
      // nor is told it differs (422); it runs, and so does its retry's replay.
      const other = await send(url, 'k1', { amount: 9 }, bob);
      expect(other.status).toBe(201);
      expect(((await other.json()) as { body: unknown }).body).toEqual({ amount: 9 });
      const replay = await send(url, 'k1', { amount: 9 }, bob);
      expect(replay.headers.get('idempotent-replayed')).toBe('true');
      // Another body under Bob's key never reveals Alice's: a 422 names only Bob's first request.
      await expectProblem(await send(url, 'k1', { amount: 10 }, bob), 422, 'key-reused');
      gate.open();
      expect((await first).status).toBe(201);
      expect(calls).toBe(2);
    });

    it('takes a scoped key of MAX_KEY_BYTES stored bytes and answers 400, not 500, for one byte more', async () => {
      const url = await start();
      // The stored id is the scope as a JSON string, U+001F, then the key: 1019 + 2 + 1 + 2 bytes.
      const scope = 'c'.repeat(MAX_KEY_BYTES - 5);
      expect(Buffer.byteLength(storedId(scope, 'k1'))).toBe(MAX_KEY_BYTES);
      const fits = await send(url, 'k1', { amount: 1 }, { headers: { 'x-client': scope } });
      expect(fits.status).toBe(201);
      const retry = await send(url, 'k1', { amount: 1 }, { headers: { 'x-client': scope } });
      expect(retry.headers.get('idempotent-replayed')).toBe('true');
      const over = await send(url, 'k1', { amount: 1 }, { headers: { 'x-client': `${scope}c` } });
      const problem = await expectProblem(over, 400, 'key-malformed');
      expect(problem.detail).toContain(`at most ${MAX_KEY_BYTES}`);
      expect(calls).toBe(1);
      expect(await store.counts()).toEqual({ pending: 0, done: 1 });
    });

    it('runs the handler once for 50 concurrent identical requests', async () => {
      const url = await start();
      const responses = await Promise.all(
        Array.from({ length: 50 }, () => send(url, 'k1', { amount: 1, delay_ms: 30 })),
      );
      expect(calls).toBe(1);
      const bodies = await Promise.all(responses.map((response) => response.json()));
      const winner = { n: 1, path: '/run', body: { amount: 1, delay_ms: 30 } };
      let executed = 0;
      for (const [index, response] of responses.entries()) {
        const replayed = response.headers.get('idempotent-replayed') === 'true';
        if (response.status === 409) {
          expect((bodies[index] as Problem).type).toMatch(/request-in-progress$/);
        } else {
          expect(response.status).toBe(201);
          expect(bodies[index]).toEqual(winner);
          if (!replayed) executed += 1;
        }
      }
      expect(executed).toBe(1);
    });
  });
}

for (const kind of [...serverKinds, ...nestServerKinds]) {
  for (const factory of factories) describeHttpBehaviour(kind, factory);
}
