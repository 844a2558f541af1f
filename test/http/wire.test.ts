import { once } from 'node:events';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { serve } from '@hono/node-server';
import express from 'express';
import { Hono } from 'hono';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { expressIdempotency } from '../../src/http/express.js';
import { honoIdempotency } from '../../src/http/hono.js';
import {
  type IdempotentOptions,
  idempotent,
  type OutcomeEvent,
  requestFingerprint,
} from '../../src/http/index.js';
import { toWire } from '../../src/http/response.js';
import type { LeasedIdempotencyStore } from '../../src/index.js';
import { type StoreFactory, storeFactories } from '../support/store-factories.js';

/** What the test route answers, chosen by the `x-answer` request header. */
type Answer =
  | { readonly kind: 'raw'; readonly contentType: string; readonly text: string }
  | { readonly kind: 'json'; readonly value: unknown }
  | { readonly kind: 'bytes'; readonly size: number };

interface Running {
  readonly url: string;
  close(): Promise<void>;
}

/** Every answer the route can give, by name. */
const ANSWERS: Record<string, Answer> = {
  bigInteger: { kind: 'raw', contentType: 'application/json', text: '{"id":12345678901234567891}' },
  duplicateKeys: { kind: 'raw', contentType: 'application/json', text: '{"a":1,"a":2}' },
  negativeZero: { kind: 'raw', contentType: 'application/json', text: '-0' },
  longDecimal: {
    kind: 'raw',
    contentType: 'application/json',
    text: '{"p":0.1000000000000000055511151231257827}',
  },
  overflow: { kind: 'raw', contentType: 'application/json', text: '{"x":1e400}' },
  undefinedField: { kind: 'json', value: { x: undefined, y: 1 } },
  big: { kind: 'bytes', size: 1024 * 1024 + 1 },
};

function bigBody(size: number): Buffer {
  return Buffer.alloc(size, 'abcdefghij');
}

async function listening(server: Server): Promise<Running> {
  if (!server.listening) await once(server, 'listening');
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    close: () =>
      new Promise((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}

type Start = (
  store: LeasedIdempotencyStore<unknown>,
  options: IdempotentOptions,
  counted: () => void,
) => Promise<Running>;

// Middleware in front of the layer sets the headers a browser client behind CORS needs.
const startExpress: Start = async (store, options, counted) => {
  const app = express();
  app.use((req, res, next) => {
    res.set('access-control-allow-origin', 'https://shop.example');
    res.set('x-request-id', req.header('x-request-id') ?? 'none');
    next();
  });
  app.use(express.json(), express.raw({ type: () => true }));
  app.post('/run', expressIdempotency(store, { scope: 'global', ...options }), (req, res) => {
    counted();
    const answer = ANSWERS[req.header('x-answer') ?? ''];
    if (answer === undefined) res.status(201).json({ ok: true });
    else if (answer.kind === 'raw') res.type(answer.contentType).send(answer.text);
    else if (answer.kind === 'json') res.json(answer.value);
    else res.type('text/plain').send(bigBody(answer.size));
  });
  return listening(app.listen(0, '127.0.0.1'));
};

const startHono: Start = async (store, options, counted) => {
  const app = new Hono();
  app.use(async (c, next) => {
    c.header('access-control-allow-origin', 'https://shop.example');
    c.header('x-request-id', c.req.header('x-request-id') ?? 'none');
    await next();
  });
  app.post('/run', honoIdempotency(store, { scope: 'global', ...options }), (c) => {
    counted();
    const answer = ANSWERS[c.req.header('x-answer') ?? ''];
    if (answer === undefined) return c.json({ ok: true }, 201);
    if (answer.kind === 'raw') {
      return c.body(answer.text, 200, { 'content-type': answer.contentType });
    }
    if (answer.kind === 'json') return c.json(answer.value as never);
    return c.body(new Uint8Array(bigBody(answer.size)), 200, { 'content-type': 'text/plain' });
  });
  return listening(serve({ fetch: app.fetch, port: 0, hostname: '127.0.0.1' }) as Server);
};

const adapters: { readonly name: string; readonly start: Start }[] = [
  { name: 'Express', start: startExpress },
  { name: 'Hono', start: startHono },
];

function describeWire(adapter: (typeof adapters)[number], factory: StoreFactory): void {
  describe(`${adapter.name} on ${factory.name}`, () => {
    let store: LeasedIdempotencyStore<unknown>;
    let closeStore: () => Promise<void>;
    let server: Running | undefined;
    let calls: number;

    beforeEach(async () => {
      ({ store, close: closeStore } = await factory.open());
      calls = 0;
    });

    afterEach(async () => {
      await server?.close();
      server = undefined;
      await closeStore();
    });

    async function start(options: IdempotentOptions = {}): Promise<string> {
      server = await adapter.start(store, options, () => {
        calls += 1;
      });
      return server.url;
    }

    function post(
      url: string,
      key: string,
      body: string | Uint8Array,
      headers: Record<string, string> = {},
    ): Promise<Response> {
      return fetch(`${url}/run`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'idempotency-key': key, ...headers },
        body,
      });
    }

    it.each(Object.entries(ANSWERS).filter(([name]) => name !== 'big'))(
      'replays the %s answer byte for byte',
      async (name) => {
        const url = await start();
        const first = await post(url, 'k1', '{}', { 'x-answer': name });
        expect(first.status).toBe(200);
        const sent = Buffer.from(await first.arrayBuffer());
        const retry = await post(url, 'k1', '{}', { 'x-answer': name });
        expect(retry.status).toBe(200);
        expect(retry.headers.get('idempotent-replayed')).toBe('true');
        expect(retry.headers.get('content-type')).toBe(first.headers.get('content-type'));
        expect(Buffer.from(await retry.arrayBuffer())).toEqual(sent);
        const answer = ANSWERS[name];
        if (answer?.kind === 'raw') expect(sent.toString()).toBe(answer.text);
        expect(calls).toBe(1);
        expect((await store.get('k1'))?.status).toBe('done');
      },
    );

    it('tells a binary body from another that decodes to the same lossy text', async () => {
      const url = await start();
      const binary = { 'content-type': 'application/octet-stream' };
      expect((await post(url, 'k1', new Uint8Array([0xff]), binary)).status).toBe(201);
      const other = await post(url, 'k1', new Uint8Array([0xfe]), binary);
      expect(other.status).toBe(422);
      expect(other.headers.get('content-type')).toMatch(/^application\/problem\+json/);
      const same = await post(url, 'k1', new Uint8Array([0xff]), binary);
      expect(same.headers.get('idempotent-replayed')).toBe('true');
      expect(calls).toBe(1);
    });

    it('keeps the headers set before the layer on replays and problems', async () => {
      const url = await start();
      const cors = 'https://shop.example';
      const first = await post(url, 'k1', '{"a":1}', { 'x-request-id': 'r1' });
      expect(first.headers.get('access-control-allow-origin')).toBe(cors);
      const replay = await post(url, 'k1', '{"a":1}', { 'x-request-id': 'r2' });
      expect(replay.headers.get('idempotent-replayed')).toBe('true');
      const reused = await post(url, 'k1', '{"a":2}', { 'x-request-id': 'r3' });
      expect(reused.status).toBe(422);
      const missing = await fetch(`${url}/run`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-request-id': 'r4' },
        body: '{}',
      });
      expect(missing.status).toBe(400);
      const inFlight = requestFingerprint({ method: 'POST', path: '/run', headers: {}, body: {} });
      await store.reserve('k2', inFlight, 1e10);
      const busy = await post(url, 'k2', '{}', { 'x-request-id': 'r5' });
      expect(busy.status).toBe(409);
      for (const [response, id] of [
        [replay, 'r2'],
        [reused, 'r3'],
        [missing, 'r4'],
        [busy, 'r5'],
      ] as const) {
        expect(response.headers.get('access-control-allow-origin')).toBe(cors);
        expect(response.headers.get('x-request-id')).toBe(id);
      }
    });

    it('runs a body nested 2,000 deep once and replays it, never a 500', async () => {
      const url = await start();
      const deep = `${'['.repeat(2000)}${']'.repeat(2000)}`;
      const first = await post(url, 'k1', deep);
      expect(first.status).toBe(201);
      const retry = await post(url, 'k1', deep);
      expect(retry.status).toBe(201);
      expect(retry.headers.get('idempotent-replayed')).toBe('true');
      const other = await post(url, 'k1', `[${deep}]`);
      expect(other.status).toBe(422);
      expect(calls).toBe(1);
    });

    it('sends an answer over maxStoredBytes in full, keeps only its size, and answers 410 to a retry', async () => {
      const url = await start();
      const size = ANSWERS.big?.kind === 'bytes' ? ANSWERS.big.size : 0;
      const first = await post(url, 'k1', '{}', { 'x-answer': 'big' });
      expect(first.status).toBe(200);
      // Buffer.equals: a deep toEqual over a megabyte takes seconds.
      expect(Buffer.from(await first.arrayBuffer()).equals(bigBody(size))).toBe(true);
      const record = await store.get('k1');
      expect(record?.status).toBe('done');
      expect(record?.response).toEqual({
        wire: 1,
        status: 200,
        headers: expect.objectContaining({ 'content-type': expect.stringMatching(/^text\/plain/) }),
        omittedBytes: size,
      });
      const retry = await post(url, 'k1', '{}', { 'x-answer': 'big' });
      expect(retry.status).toBe(410);
      expect(retry.headers.get('content-type')).toMatch(/^application\/problem\+json/);
      expect(await retry.json()).toMatchObject({
        type: 'urn:drizzle-idempotency:problem:answer-not-kept',
        status: 410,
      });
      expect(calls).toBe(1);
    });

    it('keeps an answer of any size with maxStoredBytes: Infinity', async () => {
      const url = await start({ maxStoredBytes: Number.POSITIVE_INFINITY });
      await (await post(url, 'k1', '{}', { 'x-answer': 'big' })).arrayBuffer();
      const retry = await post(url, 'k1', '{}', { 'x-answer': 'big' });
      expect(retry.headers.get('idempotent-replayed')).toBe('true');
      expect((await retry.arrayBuffer()).byteLength).toBe(1024 * 1024 + 1);
      expect(calls).toBe(1);
    });

    it('tells onOutcome every outcome, and a hook that throws changes no answer', async () => {
      const events: OutcomeEvent[] = [];
      const url = await start({
        onOutcome: (event) => {
          events.push(event);
          throw new Error('broken hook');
        },
      });
      expect((await post(url, 'k1', '{"a":1}')).status).toBe(201);
      expect((await post(url, 'k1', '{"a":1}')).status).toBe(201);
      expect((await post(url, 'k1', '{"a":2}')).status).toBe(422);
      expect(events.map((event) => [event.outcome, event.status, event.key])).toEqual([
        ['executed', 201, 'k1'],
        ['replayed', 201, 'k1'],
        ['problem', 422, 'k1'],
      ]);
      expect(events[2]?.problem?.type).toBe('urn:drizzle-idempotency:problem:key-reused');
      for (const event of events) {
        expect(event).toMatchObject({ method: 'POST', path: '/run' });
        expect(event.durationMs).toBeGreaterThanOrEqual(0);
      }
    });
  });
}

const factories = storeFactories();
for (const adapter of adapters) {
  for (const factory of factories) describeWire(adapter, factory);
}

/** Bodies that every adapter must fingerprint alike: by content type, then bytes. */
const BODIES: readonly (readonly [string, string, Uint8Array])[] = [
  ['a JSON object', 'application/json', Buffer.from('{"b":[1,2.0],"a":"é"}')],
  ['the same object reordered', 'application/json', Buffer.from('{ "a": "\\u00e9", "b": [1, 2] }')],
  ['deep JSON', 'application/json', Buffer.from(`${'['.repeat(3000)}${']'.repeat(3000)}`)],
  ['text', 'text/plain', Buffer.from('pay 10 EUR')],
  ['JSON sent as text', 'text/plain', Buffer.from('{"a":"é","b":[1,2]}')],
  ['binary', 'application/octet-stream', new Uint8Array([0xff, 0x00, 0xfe])],
  ['other binary', 'application/octet-stream', new Uint8Array([0xfe, 0x00, 0xfe])],
];

describe('one table of bodies through Express, Hono and handle()', () => {
  it('gives the same fingerprint for the same bytes on every adapter', async () => {
    const seen: Record<string, string[]> = {};
    const record = (adapter: string) => (request: Parameters<typeof requestFingerprint>[0]) => {
      const fingerprint = requestFingerprint(request);
      const name = request.headers['x-body'] as string;
      seen[name] = [...(seen[name] ?? []), `${adapter}:${fingerprint}`];
      return fingerprint;
    };
    // The local SQLite file: better-sqlite3 under Node, bun:sqlite under Bun.
    const [sqlite] = factories;
    if (sqlite === undefined) throw new Error('no SQLite store factory');
    const { store, close } = await sqlite.open();
    const express5 = express();
    express5.use(express.json(), express.text(), express.raw({ type: () => true }));
    express5.post(
      '/run',
      expressIdempotency(store, { scope: 'global', fingerprint: record('a') }),
      (_req, res) => {
        res.status(204).end();
      },
    );
    const hono = new Hono();
    hono.post('/run', honoIdempotency(store, { scope: 'global', fingerprint: record('a') }), (c) =>
      c.body(null, 204),
    );
    const layer = idempotent(store, { fingerprint: record('a') });
    const core = createServer(async (req, res) => {
      const chunks: Buffer[] = [];
      for await (const chunk of req) chunks.push(chunk as Buffer);
      const result = await layer.handle(
        { method: 'POST', path: '/run', headers: req.headers, body: Buffer.concat(chunks) },
        () => ({ status: 204 }),
      );
      const wire = toWire(result.response);
      res.writeHead(wire.status, wire.headers).end(wire.body);
    });
    const servers = [
      await listening(express5.listen(0, '127.0.0.1')),
      await listening(serve({ fetch: hono.fetch, port: 0, hostname: '127.0.0.1' }) as Server),
      await listening(core.listen(0, '127.0.0.1')),
    ];
    try {
      let n = 0;
      for (const server of servers) {
        for (const [name, type, bytes] of BODIES) {
          n += 1;
          const response = await fetch(`${server.url}/run`, {
            method: 'POST',
            headers: { 'content-type': type, 'idempotency-key': `k${n}`, 'x-body': name },
            body: bytes,
          });
          expect(response.status).toBe(204);
        }
      }
    } finally {
      for (const server of servers) await server.close();
      await close();
    }
    const fingerprint = (name: string) => {
      const all = new Set(seen[name]?.map((entry) => entry.split(':')[1]));
      expect(seen[name]).toHaveLength(3);
      expect(all.size).toBe(1);
      return [...all][0];
    };
    const expected = (bytes: Uint8Array) =>
      requestFingerprint({ method: 'POST', path: '/run', headers: {}, body: bytes });
    for (const [name, , bytes] of BODIES) expect(fingerprint(name)).toBe(expected(bytes));
    expect(fingerprint('a JSON object')).toBe(fingerprint('the same object reordered'));
    expect(fingerprint('a JSON object')).toBe(fingerprint('JSON sent as text'));
    expect(fingerprint('binary')).not.toBe(fingerprint('other binary'));
    expect(fingerprint('text')).not.toBe(fingerprint('a JSON object'));
  });
});
