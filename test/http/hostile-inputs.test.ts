import { once } from 'node:events';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { serve } from '@hono/node-server';
import express from 'express';
import Fastify from 'fastify';
import { Hono } from 'hono';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { expressIdempotency, keepRawBody } from '../../src/http/express.js';
import { fastifyIdempotency } from '../../src/http/fastify.js';
import { honoIdempotency } from '../../src/http/hono.js';
import { openSqliteStore, type SqliteIdempotencyStore } from '../../src/sqlite/index.js';
import { freshDbPath, tempDir } from '../support/temp.js';

// Inputs a client controls that took the old code quadratic time: a key whose trim regex retried
// from every space, and JSON numbers whose trailing-zero regex retried from every zero. Each is
// sent through a real server, and the event loop's longest stall while it is handled is measured
// (the server runs in this process, so a blocked handler blocks this loop). The bound is far above
// a loaded machine's jitter and far below what the old code took (seconds).
const MAX_STALL_MS = 300;

// Big enough for a 60,000-character key line; Node's default is 16 KB.
const MAX_HEADER_BYTES = 128 * 1024;

const dir = tempDir('idem-hostile-');
let store: SqliteIdempotencyStore<unknown>;
let close: (() => Promise<void>) | undefined;

beforeEach(() => {
  store = openSqliteStore(freshDbPath(dir));
});

afterEach(async () => {
  await close?.();
  close = undefined;
  store.close();
});

function answer(): { created: true } {
  return { created: true };
}

async function listening(server: Server): Promise<string> {
  if (!server.listening) await once(server, 'listening');
  close = () =>
    new Promise((resolve) => {
      server.close(() => resolve());
      server.closeAllConnections();
    });
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}/pay`;
}

async function startExpress(): Promise<string> {
  const app = express();
  app.use(express.json({ verify: keepRawBody }));
  app.post('/pay', expressIdempotency(store, { scope: 'global' }), (_req, res) => {
    res.status(201).json(answer());
  });
  const server = createServer({ maxHeaderSize: MAX_HEADER_BYTES }, app);
  server.listen(0, '127.0.0.1');
  return listening(server);
}

async function startFastify(): Promise<string> {
  const app = Fastify({ forceCloseConnections: true, http: { maxHeaderSize: MAX_HEADER_BYTES } });
  app.post('/pay', { ...fastifyIdempotency(store, { scope: 'global' }) }, async (_request, reply) =>
    reply.code(201).send(answer()),
  );
  await app.listen({ port: 0, host: '127.0.0.1' });
  close = () => app.close();
  return `http://127.0.0.1:${(app.server.address() as AddressInfo).port}/pay`;
}

async function startHono(): Promise<string> {
  const app = new Hono();
  app.post('/pay', honoIdempotency(store, { scope: 'global' }), (c) => c.json(answer(), 201));
  const server = serve({
    fetch: app.fetch,
    port: 0,
    hostname: '127.0.0.1',
    serverOptions: { maxHeaderSize: MAX_HEADER_BYTES },
  }) as Server;
  return listening(server);
}

/**
 * A probe of the event loop: a 10 ms interval that keeps the longest gap between two of its ticks
 * beyond its period. `settled` waits for the tick after the request, so a stall that ended just
 * before the response arrived is counted too.
 */
function loopProbe(): { longestStallMs(): Promise<number>; stop(): void } {
  const period = 10;
  let last = performance.now();
  let longest = 0;
  let waiting: (() => void)[] = [];
  const timer = setInterval(() => {
    const now = performance.now();
    longest = Math.max(longest, now - last - period);
    last = now;
    const ticked = waiting;
    waiting = [];
    for (const resolve of ticked) resolve();
  }, period);
  return {
    longestStallMs: async () => {
      await new Promise<void>((resolve) => waiting.push(resolve));
      return longest;
    },
    stop: () => clearInterval(timer),
  };
}

/** The response to one request and the event loop's longest stall while it was handled. */
async function measured(
  url: string,
  key: string,
  body: string,
): Promise<{ status: number; stallMs: number }> {
  const probe = loopProbe();
  try {
    const response = await fetch(url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'idempotency-key': key },
      body,
    });
    await response.arrayBuffer();
    return { status: response.status, stallMs: await probe.longestStallMs() };
  } finally {
    probe.stop();
  }
}

const spacedKey = (spaces: number): string => `a${' '.repeat(spaces)}b`;

// Numbers of 40,000 and 90,000 digits (the second under express.json's 100 KB limit), their
// zeros trailing, or trailing and then ended by another digit, which is where `/0+$/` retried.
const hostileNumbers: readonly [string, string][] = [
  ['40,000 digits ending in zeros', `1${'0'.repeat(39_999)}`],
  ['40,000 digits, a run of zeros ended by a digit', `1${'0'.repeat(39_998)}1`],
  ['90,000 digits ending in zeros', `1${'0'.repeat(89_999)}`],
  ['90,000 digits, a run of zeros ended by a digit', `1${'0'.repeat(89_998)}1`],
  ['a 90,000-digit fraction of zeros ended by a digit', `0.${'0'.repeat(89_998)}1`],
];

// The longest exponent each server's default body limit lets through (express.json: 100 KB,
// Fastify: 1 MB, Hono: none): a BigInt of it took the old code a second per megabyte.
describe.each([
  { name: 'Express (keepRawBody)', start: startExpress, exponentDigits: 90_000 },
  { name: 'Fastify', start: startFastify, exponentDigits: 900_000 },
  { name: 'Hono', start: startHono, exponentDigits: 900_000 },
])('$name: hostile inputs are handled in linear time', ({ start, exponentDigits }) => {
  it.each([16_000, 60_000])(
    'refuses a key of two letters around %i spaces without stalling the loop',
    async (spaces) => {
      const url = await start();
      const { status, stallMs } = await measured(url, spacedKey(spaces), '{"amount":1}');
      // A bare key holds no spaces, so the key is refused, as it always was.
      expect(status).toBe(400);
      expect(stallMs).toBeLessThan(MAX_STALL_MS);
    },
    30_000,
  );

  it.each(hostileNumbers)(
    'fingerprints a body with %s without stalling the loop',
    async (_name, number) => {
      const url = await start();
      const body = `{"amount":${number}}`;
      const first = await measured(url, 'big-number', body);
      expect(first.status).toBe(201);
      expect(first.stallMs).toBeLessThan(MAX_STALL_MS);
      // The replay fingerprints the body again and must match the first.
      const replay = await measured(url, 'big-number', body);
      expect(replay.status).toBe(201);
      expect(replay.stallMs).toBeLessThan(MAX_STALL_MS);
    },
    30_000,
  );

  it('fingerprints a number whose exponent has as many digits as the body limit allows', async () => {
    const url = await start();
    const body = `{"amount":1e${'9'.repeat(exponentDigits)}}`;
    const first = await measured(url, 'big-exponent', body);
    expect(first.status).toBe(201);
    expect(first.stallMs).toBeLessThan(MAX_STALL_MS);
    const replay = await measured(url, 'big-exponent', body);
    expect(replay.status).toBe(201);
    expect(replay.stallMs).toBeLessThan(MAX_STALL_MS);
  }, 30_000);
});
