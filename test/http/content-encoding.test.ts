import { once } from 'node:events';
import { request as httpRequest, type IncomingMessage } from 'node:http';
import { gunzipSync, gzipSync } from 'node:zlib';
import compression from 'compression';
import express from 'express';
import { Hono } from 'hono';
import { compress } from 'hono/compress';
import { afterEach, describe, expect, it } from 'vitest';
import { expressIdempotency } from '../../src/http/express.js';
import { fetchIdempotency } from '../../src/http/fetch.js';
import { honoIdempotency } from '../../src/http/hono.js';
import { openSqliteStore, type SqliteIdempotencyStore } from '../../src/sqlite/index.js';
import { listening, type TestServer } from '../support/http-servers.js';
import { freshDbPath, tempDir } from '../support/temp.js';

const dir = tempDir('idem-encoding-');
// Long enough for every compressor's threshold (compression's default is 1 KB).
const PAYMENT = { id: 'p_1', note: 'x'.repeat(4096) };

/** An answer as it came off the wire: no client decoding, the bytes as sent. */
interface RawAnswer {
  readonly status: number;
  readonly headers: Record<string, string | string[] | undefined>;
  readonly body: Buffer;
}

// node:http, not fetch: fetch decodes gzip, and the test is about the bytes sent.
async function post(url: string, key: string): Promise<RawAnswer> {
  const req = httpRequest(`${url}/payments`, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      'accept-encoding': 'gzip',
      'idempotency-key': `"${key}"`,
    },
  });
  req.end('{"amount":1}');
  const [res] = (await once(req, 'response')) as [IncomingMessage];
  const chunks: Buffer[] = [];
  for await (const chunk of res) chunks.push(chunk as Buffer);
  return { status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks) };
}

let store: SqliteIdempotencyStore<unknown> | undefined;
let server: TestServer | undefined;

afterEach(async () => {
  await server?.close();
  store?.close();
  server = undefined;
  store = undefined;
});

async function listen(app: express.Express): Promise<string> {
  server = await listening(app.listen(0, '127.0.0.1'));
  return server.url;
}

describe('an answer compressed inside the layer keeps its Content-Encoding', () => {
  it('Express with compression() on the route: the replay is the same gzip bytes, labelled gzip', async () => {
    store = openSqliteStore(freshDbPath(dir));
    let runs = 0;
    const app = express();
    app.disable('x-powered-by');
    app.post('/payments', expressIdempotency(store), compression({ threshold: 0 }), (_req, res) => {
      runs += 1;
      res.status(201).json(PAYMENT);
    });
    const url = await listen(app);

    const first = await post(url, 'k1');
    expect(first.status).toBe(201);
    expect(first.headers['content-encoding']).toBe('gzip');
    expect(JSON.parse(gunzipSync(first.body).toString())).toEqual(PAYMENT);

    const replay = await post(url, 'k1');
    expect(runs).toBe(1);
    expect(replay.headers['idempotent-replayed']).toBe('true');
    expect(replay.status).toBe(201);
    expect(replay.headers['content-encoding']).toBe('gzip');
    expect(replay.headers['content-type']).toMatch(/^application\/json/);
    expect(replay.body.equals(first.body)).toBe(true);
  });

  it('Express with compression() before the layer: the answer is stored plain and each answer compressed', async () => {
    store = openSqliteStore(freshDbPath(dir));
    const app = express();
    app.disable('x-powered-by');
    app.use(compression({ threshold: 0 }));
    app.post('/payments', expressIdempotency(store), (_req, res) => {
      res.status(201).json(PAYMENT);
    });
    const url = await listen(app);

    const first = await post(url, 'k1');
    const replay = await post(url, 'k1');
    expect(replay.headers['idempotent-replayed']).toBe('true');
    for (const answer of [first, replay]) {
      expect(answer.headers['content-encoding']).toBe('gzip');
      expect(JSON.parse(gunzipSync(answer.body).toString())).toEqual(PAYMENT);
    }
    const record = await store.get('k1');
    expect(record?.status).toBe('done');
    const stored = record?.status === 'done' ? (record.response as Record<string, unknown>) : {};
    expect(stored.headers).not.toHaveProperty('content-encoding');
    expect(JSON.parse(String(stored.body))).toEqual(PAYMENT);
  });

  it('Fetch: a handler that gzips its own answer is replayed as the same gzip bytes, labelled gzip', async () => {
    store = openSqliteStore(freshDbPath(dir));
    const gzipped = gzipSync(JSON.stringify(PAYMENT));
    let runs = 0;
    const handler = fetchIdempotency(store)(async () => {
      runs += 1;
      return new Response(gzipped, {
        status: 201,
        headers: { 'content-type': 'application/json', 'content-encoding': 'gzip' },
      });
    });
    const request = () =>
      new Request('http://127.0.0.1/payments', {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'idempotency-key': '"k1"' },
        body: '{"amount":1}',
      });

    const first = await handler(request());
    expect(first.headers.get('content-encoding')).toBe('gzip');
    expect(Buffer.from(await first.arrayBuffer()).equals(gzipped)).toBe(true);

    const replay = await handler(request());
    expect(runs).toBe(1);
    expect(replay.headers.get('idempotent-replayed')).toBe('true');
    expect(replay.headers.get('content-encoding')).toBe('gzip');
    expect(Buffer.from(await replay.arrayBuffer()).equals(gzipped)).toBe(true);
  });

  it('Hono with compress() on the route: the replay is the same gzip bytes, labelled gzip', async () => {
    store = openSqliteStore(freshDbPath(dir));
    let runs = 0;
    const app = new Hono();
    app.post('/payments', honoIdempotency(store), compress({ encoding: 'gzip' }), (c) => {
      runs += 1;
      return c.json(PAYMENT, 201);
    });
    const request = () =>
      app.request('/payments', {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          'accept-encoding': 'gzip',
          'idempotency-key': '"k1"',
        },
        body: '{"amount":1}',
      });

    const first = await request();
    expect(first.headers.get('content-encoding')).toBe('gzip');
    const firstBytes = Buffer.from(await first.arrayBuffer());
    expect(JSON.parse(gunzipSync(firstBytes).toString())).toEqual(PAYMENT);

    const replay = await request();
    expect(runs).toBe(1);
    expect(replay.headers.get('idempotent-replayed')).toBe('true');
    expect(replay.headers.get('content-encoding')).toBe('gzip');
    expect(Buffer.from(await replay.arrayBuffer()).equals(firstBytes)).toBe(true);
  });

  it('Hono with compress() before the layer: the answer is stored plain and each answer compressed', async () => {
    store = openSqliteStore(freshDbPath(dir));
    const app = new Hono();
    app.use('*', compress({ encoding: 'gzip' }));
    app.post('/payments', honoIdempotency(store), (c) => c.json(PAYMENT, 201));
    const request = () =>
      app.request('/payments', {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          'accept-encoding': 'gzip',
          'idempotency-key': '"k1"',
        },
        body: '{"amount":1}',
      });

    const first = await request();
    const replay = await request();
    expect(replay.headers.get('idempotent-replayed')).toBe('true');
    for (const answer of [first, replay]) {
      expect(answer.headers.get('content-encoding')).toBe('gzip');
      const bytes = Buffer.from(await answer.arrayBuffer());
      expect(JSON.parse(gunzipSync(bytes).toString())).toEqual(PAYMENT);
    }
    const record = await store.get('k1');
    const stored = record?.status === 'done' ? (record.response as Record<string, unknown>) : {};
    expect(stored.headers).not.toHaveProperty('content-encoding');
    expect(JSON.parse(String(stored.body))).toEqual(PAYMENT);
  });
});
