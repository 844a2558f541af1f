import 'reflect-metadata';
import type { Server, ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Readable } from 'node:stream';
import { serve } from '@hono/node-server';
import { Controller, HttpCode, Post, Res, StreamableFile } from '@nestjs/common';
import express from 'express';
import Fastify from 'fastify';
import { Hono } from 'hono';
import { streamSSE } from 'hono/streaming';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { expressIdempotency } from '../../src/http/express.js';
import { fastifyIdempotency } from '../../src/http/fastify.js';
import { fetchIdempotency } from '../../src/http/fetch.js';
import { honoIdempotency } from '../../src/http/hono.js';
import { IdempotencyModule, Idempotent } from '../../src/http/nestjs.js';
import type { IdempotentOptions } from '../../src/http/options.js';
import { openSqliteStore, type SqliteIdempotencyStore } from '../../src/sqlite/index.js';
import { listening } from '../support/http-servers.js';
import { startNestApp } from '../support/nest-app.js';
import { freshDbPath, tempDir } from '../support/temp.js';
import { type Deferred, deferred, until } from '../support/waiting.js';

// A streamed answer on every adapter, as docs/http.md ("Streamed answers") describes it: sent as
// it comes, replayed byte for byte while it fits maxStoredBytes, and otherwise recorded as done
// without a replayable answer, so a retry gets 410 answer-not-kept and never runs the handler;
// recorded the moment it cannot be kept, so a retry sent while it is still open gets 410 too.

const dir = tempDir('idem-streamed-');
const KEY = 'streamed-answer-1';
// Two server-sent events: the first goes out at once, the second once the test releases it.
const FIRST = 'data: one\n\n';
const SECOND = 'data: two\n\n';
const BODY = FIRST + SECOND;
const SSE = 'text/event-stream';

let store: SqliteIdempotencyStore<unknown>;
let close: (() => Promise<void>) | undefined;
let runs = 0;
// Holds the stream between its two events, so the test sees the first arrive on its own.
let hold: Deferred<void>;

beforeEach(() => {
  store = openSqliteStore(freshDbPath(dir));
  runs = 0;
  hold = deferred();
});

afterEach(async () => {
  hold.resolve();
  await close?.();
  close = undefined;
  store.close();
});

async function* events(): AsyncGenerator<string> {
  yield FIRST;
  await hold.promise;
  yield SECOND;
}

type Options = Pick<
  IdempotentOptions,
  'maxStoredBytes' | 'storeStreams' | 'streamRecordAfterSeconds'
>;

async function listen(server: Server): Promise<string> {
  const served = await listening(server);
  close = served.close;
  return `${served.url}/feed`;
}

function webEvents(): ReadableStream<Uint8Array> {
  const text = Readable.toWeb(Readable.from(events())) as ReadableStream<string>;
  return text.pipeThrough(new TextEncoderStream());
}

// Express's response is the Node response itself; Fastify's reply holds it as `raw`.
function nodeResponse(res: object): ServerResponse {
  return ('raw' in res ? res.raw : res) as ServerResponse;
}

function startNest(platform: 'express' | 'fastify') {
  return async (options: Options): Promise<string> => {
    @Controller()
    class FeedController {
      @Post('feed')
      @HttpCode(200)
      @Idempotent()
      feed(@Res({ passthrough: true }) res: object): StreamableFile {
        runs += 1;
        nodeResponse(res).setHeader('location', '/feed/1');
        return new StreamableFile(Readable.from(events()), { type: SSE });
      }
    }
    const app = await startNestApp(platform, {
      imports: [IdempotencyModule.forRoot({ scope: 'global', store, ...options })],
      controllers: [FeedController],
    });
    close = () => app.close();
    return `${app.url}/feed`;
  };
}

// Each adapter's own way of streaming the same two events, with a Location header.
const adapters: Record<string, (options: Options) => Promise<string>> = {
  'Express res.write': async (options) => {
    const app = express();
    app.post(
      '/feed',
      expressIdempotency(store, { scope: 'global', ...options }),
      async (_, res) => {
        runs += 1;
        res.setHeader('content-type', SSE);
        res.setHeader('location', '/feed/1');
        res.flushHeaders();
        for await (const event of events()) res.write(event);
        res.end();
      },
    );
    return listen(app.listen(0, '127.0.0.1'));
  },
  'Fastify reply.send(stream)': async (options) => {
    const app = Fastify({ forceCloseConnections: true });
    app.post(
      '/feed',
      { ...fastifyIdempotency(store, { scope: 'global', ...options }) },
      async (_request, reply) => {
        runs += 1;
        return reply.type(SSE).header('location', '/feed/1').send(Readable.from(events()));
      },
    );
    await app.listen({ port: 0, host: '127.0.0.1' });
    close = () => app.close();
    return `http://127.0.0.1:${(app.server.address() as AddressInfo).port}/feed`;
  },
  'Hono streamSSE': async (options) => {
    const app = new Hono();
    app.post('/feed', honoIdempotency(store, { scope: 'global', ...options }), (c) => {
      runs += 1;
      c.header('location', '/feed/1');
      return streamSSE(c, async (sse) => {
        await sse.writeSSE({ data: 'one' });
        await hold.promise;
        await sse.writeSSE({ data: 'two' });
      });
    });
    return listen(serve({ fetch: app.fetch, port: 0, hostname: '127.0.0.1' }) as Server);
  },
  'Fetch Response(stream)': async (options) => {
    const handler = fetchIdempotency(store, { scope: 'global', ...options })(async () => {
      runs += 1;
      return new Response(webEvents(), {
        headers: { 'content-type': SSE, location: '/feed/1' },
      });
    });
    return listen(serve({ fetch: handler, port: 0, hostname: '127.0.0.1' }) as Server);
  },
  'NestJS on Express StreamableFile': startNest('express'),
  'NestJS on Fastify StreamableFile': startNest('fastify'),
};

function post(url: string, signal?: AbortSignal): Promise<Response> {
  return fetch(url, {
    method: 'POST',
    ...(signal === undefined ? {} : { signal }),
    headers: { 'content-type': 'application/json', 'idempotency-key': KEY },
    body: '{"feed":1}',
  });
}

// Reads the body until `text` has arrived, and returns what arrived.
async function readUntil(
  reader: ReadableStreamDefaultReader<Uint8Array>,
  text: string,
): Promise<string> {
  const decoder = new TextDecoder();
  let got = '';
  while (!got.includes(text)) {
    const { done, value } = await reader.read();
    if (done) break;
    got += decoder.decode(value, { stream: true });
  }
  return got;
}

// The first request: the first event arrives while the handler still holds the second, so the
// answer was not buffered; `whileOpen` runs then, the stream still open; then the rest, whole.
async function streamFirst(url: string, whileOpen?: () => Promise<void>): Promise<Response> {
  const first = await post(url);
  expect(first.status).toBe(200);
  const reader = (first.body as ReadableStream<Uint8Array>).getReader();
  expect(await readUntil(reader, FIRST)).toBe(FIRST);
  await whileOpen?.();
  hold.resolve();
  expect(await readUntil(reader, SECOND)).toBe(SECOND);
  expect((await reader.read()).done).toBe(true);
  return first;
}

async function doneRow(): Promise<void> {
  await until(async () => (await store.get(KEY))?.status !== 'pending');
  expect((await store.get(KEY))?.status).toBe('done');
}

async function expectNotKept(url: string, because: RegExp): Promise<void> {
  await doneRow();
  const retry = await post(url);
  expect(retry.status).toBe(410);
  const problem = (await retry.json()) as { type: string; detail: string };
  expect(problem.type).toBe('urn:drizzle-idempotency:problem:answer-not-kept');
  expect(problem.detail).toMatch(because);
  expect(problem.detail).not.toMatch(/\d/);
  expect(runs).toBe(1);
}

describe.each(Object.entries(adapters))('%s', (_name, start) => {
  it('sends a stream as it comes and replays it byte for byte, with its headers', async () => {
    const url = await start({});
    const first = await streamFirst(url);
    expect(first.headers.get('content-type')).toMatch(/^text\/event-stream/);
    await doneRow();
    const retry = await post(url);
    expect(retry.status).toBe(200);
    expect(retry.headers.get('idempotent-replayed')).toBe('true');
    expect(retry.headers.get('content-type')).toBe(first.headers.get('content-type'));
    expect(retry.headers.get('location')).toBe('/feed/1');
    expect(await retry.text()).toBe(BODY);
    expect(runs).toBe(1);
  });

  it('sends a stream over maxStoredBytes whole, and a retry gets 410', async () => {
    const url = await start({ maxStoredBytes: FIRST.length });
    await streamFirst(url);
    await expectNotKept(url, /larger than the largest answer kept/);
  });

  it('keeps no stream with storeStreams: false, and a retry gets 410', async () => {
    const url = await start({ storeStreams: false });
    await streamFirst(url);
    await expectNotKept(url, /streamed answers are not kept/);
  });

  it('records a stream the moment it passes maxStoredBytes: a retry while it is open gets 410', async () => {
    // The first event alone is past the cap: the key is recorded while the handler holds the second.
    const url = await start({ maxStoredBytes: 4 });
    await streamFirst(url, () => expectNotKept(url, /larger than the largest answer kept/));
    await expectNotKept(url, /larger than the largest answer kept/);
  });

  it('records a stream at its first byte with storeStreams: false: a retry while it is open gets 410', async () => {
    const url = await start({ storeStreams: false });
    await streamFirst(url, () => expectNotKept(url, /streamed answers are not kept/));
    await expectNotKept(url, /streamed answers are not kept/);
  });

  it('records a stream still open after streamRecordAfterSeconds: a retry while it is open gets 410', async () => {
    const url = await start({ streamRecordAfterSeconds: 0.2 });
    await streamFirst(url, () => expectNotKept(url, /still open when the layer stopped waiting/));
    await expectNotKept(url, /still open when the layer stopped waiting/);
  });

  it('records a stream the client abandons as done, and a retry gets 410', async () => {
    const url = await start({});
    const leaving = new AbortController();
    const first = await post(url, leaving.signal);
    const reader = (first.body as ReadableStream<Uint8Array>).getReader();
    expect(await readUntil(reader, FIRST)).toBe(FIRST);
    leaving.abort();
    await reader.read().catch(() => undefined);
    await expectNotKept(url, /did not end before the client left/);
  });
});
