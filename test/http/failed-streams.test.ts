import 'reflect-metadata';
import { once } from 'node:events';
import type { Server, ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { serve } from '@hono/node-server';
import { Controller, Post, Res, StreamableFile } from '@nestjs/common';
import express from 'express';
import Fastify from 'fastify';
import { Hono } from 'hono';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { expressIdempotency, keepRawBody } from '../../src/http/express.js';
import { fastifyIdempotency } from '../../src/http/fastify.js';
import { fetchIdempotency } from '../../src/http/fetch.js';
import { honoIdempotency } from '../../src/http/hono.js';
import { IdempotencyModule, Idempotent } from '../../src/http/nestjs.js';
import { openSqliteStore, type SqliteIdempotencyStore } from '../../src/sqlite/index.js';
import { serveFetch } from '../support/http-servers.js';
import { nestPlatforms, startNestApp } from '../support/nest-app.js';
import { freshDbPath, tempDir } from '../support/temp.js';
import { type Deferred, deferred, until } from '../support/waiting.js';

const dir = tempDir('idem-failed-streams-');
const KEY = 'failed-stream-1';
let store: SqliteIdempotencyStore<unknown>;
let close: (() => Promise<void>) | undefined;
// How many times the route's handler ran; its first run fails, every later one answers 201.
let runs = 0;

beforeEach(() => {
  store = openSqliteStore(freshDbPath(dir));
  runs = 0;
});

afterEach(async () => {
  await close?.();
  close = undefined;
  store.close();
});

async function listen(server: Server): Promise<string> {
  if (!server.listening) await once(server, 'listening');
  close = () =>
    new Promise((resolve) => {
      server.closeAllConnections();
      server.close(() => resolve());
    });
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}/pay`;
}

// A body that sends its first chunk, then fails: what a file, a proxy or a query cursor does when
// its source goes away mid-answer.
function failingStream(): Readable {
  let sent = false;
  return new Readable({
    read() {
      if (sent) this.destroy(new Error('the source of the body failed'));
      else {
        sent = true;
        this.push('{"partial":');
      }
    },
  });
}

function failingWebStream(): ReadableStream<Uint8Array> {
  return Readable.toWeb(failingStream()) as ReadableStream<Uint8Array>;
}

// The first request with the key: whatever reaches the client (a 500, a cut connection) is read
// to its end or its failure.
async function firstAttempt(url: string): Promise<void> {
  try {
    const response = await post(url);
    await response.arrayBuffer();
  } catch {
    // A connection the server cut: what such a client sees.
  }
}

function post(url: string, signal?: AbortSignal): Promise<Response> {
  return fetch(url, {
    method: 'POST',
    ...(signal === undefined ? {} : { signal }),
    headers: { 'content-type': 'application/json', 'idempotency-key': KEY },
    body: '{"amount":1}',
  });
}

async function settledRow(): Promise<{ status: string } | null> {
  await until(async () => (await store.get(KEY))?.status !== 'pending');
  return store.get(KEY);
}

// After the failed first run, the key is not left pending, and the retry runs the handler again.
async function expectReleased(url: string): Promise<void> {
  await firstAttempt(url);
  expect(await settledRow()).toBeNull();
  const retry = await post(url);
  expect(retry.status).toBe(201);
  expect(await retry.json()).toEqual({ ok: true });
  expect(runs).toBe(2);
}

describe('Express: a handler that fails without ending its response releases its key', () => {
  async function start(fail: (res: express.Response, next: express.NextFunction) => unknown) {
    const app = express();
    app.use(express.json({ verify: keepRawBody }));
    app.post('/pay', expressIdempotency(store, { scope: 'global' }), async (_req, res, next) => {
      runs += 1;
      if (runs === 1) return fail(res, next);
      res.status(201).json({ ok: true });
    });
    return listen(app.listen(0, '127.0.0.1'));
  }

  it('when the stream piped into the response errors', async () => {
    const url = await start(async (res) => {
      res.status(201).type('application/json');
      await pipeline(failingStream(), res).catch(() => undefined);
    });
    await expectReleased(url);
  });

  it('when the handler destroys the response', async () => {
    await expectReleased(await start((res) => res.destroy()));
  });

  it('when it throws after flushing its headers', async () => {
    const url = await start((res) => {
      res.status(201).flushHeaders();
      throw new Error('failed after the headers went out');
    });
    await expectReleased(url);
  });

  it('when it calls next(err) after writeHead', async () => {
    const url = await start((res, next) => {
      res.writeHead(201);
      next(new Error('failed after writeHead'));
    });
    await expectReleased(url);
  });
});

// A client that leaves is no failure of the process: the handler still runs, and its answer is
// recorded when it ends, so the retry replays it instead of running the handler a second time.
async function expectLeftClientAnswered(url: string, hold: Deferred<void>, closed: () => boolean) {
  const leaving = new AbortController();
  const first = post(url, leaving.signal).catch(() => undefined);
  await until(() => runs === 1);
  leaving.abort();
  await first;
  await until(closed);
  hold.resolve();
  expect((await settledRow())?.status).toBe('done');
  const retry = await post(url);
  expect(retry.headers.get('idempotent-replayed')).toBe('true');
  expect(await retry.json()).toEqual({ ok: true });
  expect(runs).toBe(1);
}

it('Express: a client that leaves while the handler runs still gets its answer recorded', async () => {
  const hold = deferred();
  let closed = false;
  const app = express();
  app.post('/pay', expressIdempotency(store, { scope: 'global' }), async (_req, res) => {
    runs += 1;
    res.once('close', () => {
      closed = true;
    });
    await hold.promise;
    res.status(201).json({ ok: true });
  });
  await expectLeftClientAnswered(await listen(app.listen(0, '127.0.0.1')), hold, () => closed);
});

describe('Fastify: a failed stream or a hijacked reply ends the claim', () => {
  async function start(fail: (reply: import('fastify').FastifyReply) => unknown): Promise<string> {
    const app = Fastify({ forceCloseConnections: true });
    app.setErrorHandler((_error, _request, reply) => {
      reply.code(500).type('text/plain').send('handler failed');
    });
    app.post(
      '/pay',
      { ...fastifyIdempotency(store, { scope: 'global' }) },
      async (_request, reply) => {
        runs += 1;
        if (runs === 1) return fail(reply);
        return reply.code(201).send({ ok: true });
      },
    );
    await app.listen({ port: 0, host: '127.0.0.1' });
    close = () => app.close();
    return `http://127.0.0.1:${(app.server.address() as AddressInfo).port}/pay`;
  }

  it('releases the key when the stream sent with reply.send errors', async () => {
    const url = await start((reply) =>
      reply.code(201).type('application/json').send(failingStream()),
    );
    await expectReleased(url);
  });

  it('releases the key of a reply destroyed before it was sent', async () => {
    await expectReleased(
      await start((reply) => {
        reply.raw.destroy();
        return reply;
      }),
    );
  });

  it('records the answer a hijacked reply ended completely, and replays it', async () => {
    const url = await start((reply) => {
      reply.hijack();
      reply.raw.writeHead(201, { 'content-type': 'application/json', location: '/pay/1' });
      reply.raw.write('{"id":');
      reply.raw.end('1}');
    });
    const first = await post(url);
    expect(first.status).toBe(201);
    expect(await first.text()).toBe('{"id":1}');
    expect((await settledRow())?.status).toBe('done');
    const retry = await post(url);
    expect(retry.status).toBe(201);
    expect(retry.headers.get('idempotent-replayed')).toBe('true');
    expect(retry.headers.get('content-type')).toBe('application/json');
    expect(retry.headers.get('location')).toBe('/pay/1');
    expect(await retry.text()).toBe('{"id":1}');
    expect(runs).toBe(1);
  });

  it('releases the key of a hijacked reply that was not ended completely', async () => {
    const url = await start((reply) => {
      reply.hijack();
      reply.raw.writeHead(201, { 'content-type': 'application/json' });
      reply.raw.write('{"partial":');
      reply.raw.destroy();
    });
    await expectReleased(url);
  });
});

describe('Hono and Fetch: a streamed answer that errors releases its key', () => {
  it('Hono c.body(stream)', async () => {
    const app = new Hono();
    app.onError((_error, c) => c.text('handler failed', 500));
    app.post('/pay', honoIdempotency(store, { scope: 'global' }), (c) => {
      runs += 1;
      if (runs === 1) return c.body(failingWebStream(), 201);
      return c.json({ ok: true }, 201);
    });
    await expectReleased(
      await listen(serve({ fetch: app.fetch, port: 0, hostname: '127.0.0.1' }) as Server),
    );
  });

  it('a Fetch handler answering a stream', async () => {
    const handler = fetchIdempotency(store, { scope: 'global' })(async () => {
      runs += 1;
      if (runs === 1) return new Response(failingWebStream(), { status: 201 });
      return Response.json({ ok: true }, { status: 201 });
    });
    const server = await serveFetch(handler);
    close = () => server.close();
    await expectReleased(`${server.url}/pay`);
  });
});

// Express's response is the Node response itself; Fastify's reply holds it as `raw`.
function nodeResponse(res: object): ServerResponse {
  return ('raw' in res ? res.raw : res) as ServerResponse;
}

describe.each(nestPlatforms)('NestJS on %s: a failed answer releases its key', (platform) => {
  let hold: Deferred<void>;

  async function start(fail: (res: object) => unknown): Promise<string> {
    @Controller()
    class PayController {
      @Post('pay')
      @Idempotent()
      async pay(@Res({ passthrough: true }) res: object): Promise<unknown> {
        runs += 1;
        if (runs === 1) return fail(res);
        nodeResponse(res).statusCode = 201;
        return { ok: true };
      }
    }
    const app = await startNestApp(platform, {
      imports: [IdempotencyModule.forRoot({ scope: 'global', store })],
      controllers: [PayController],
    });
    close = () => app.close();
    return `${app.url}/pay`;
  }

  beforeEach(() => {
    hold = deferred();
  });

  it('when the StreamableFile it returns errors', async () => {
    await expectReleased(await start(() => new StreamableFile(failingStream())));
  });

  // On Fastify, headers flushed past the reply make its error handler throw
  // ERR_HTTP_HEADERS_SENT and leave the connection open: Fastify's behaviour, not the layer's,
  // so the case exists on Express only.
  if (platform === 'express') {
    it('when it throws after its headers went out', async () => {
      const url = await start((res) => {
        nodeResponse(res).flushHeaders();
        throw new Error('failed after the headers went out');
      });
      await expectReleased(url);
    });
  }

  it('when it destroys the response and is still running', async () => {
    const url = await start(async (res) => {
      nodeResponse(res).destroy();
      await hold.promise;
      return { late: true };
    });
    await expectReleased(url);
    hold.resolve();
    // The late answer of the first run is nobody's: the retry's answer stays the stored one.
    await until(async () => (await store.get(KEY))?.status === 'done');
    const replay = await post(url);
    expect(await replay.json()).toEqual({ ok: true });
  });
});
