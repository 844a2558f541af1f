import { once } from 'node:events';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { connect } from 'node:net';
import { serve } from '@hono/node-server';
import express from 'express';
import Fastify from 'fastify';
import { Hono } from 'hono';
import { bodyLimit } from 'hono/body-limit';
import { HTTPException } from 'hono/http-exception';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { expressIdempotency } from '../../src/http/express.js';
import { fastifyIdempotency } from '../../src/http/fastify.js';
import { honoIdempotency } from '../../src/http/hono.js';
import { openSqliteStore } from '../../src/sqlite/index.js';
import { readRows } from '../support/sqlite-harness.js';
import { freshDbPath, tempDir } from '../support/temp.js';

const dir = tempDir();
const LIMIT = 100 * 1024;

/** A real server on 127.0.0.1 with the layer on POST /pay, and how often its handler ran. */
interface Target {
  path: string;
  port: number;
  runs: () => number;
  close: () => Promise<void>;
}

async function listening(server: Server) {
  if (!server.listening) await once(server, 'listening');
  return (server.address() as AddressInfo).port;
}

function closer(server: Server, store: { close(): void }) {
  return () =>
    new Promise<void>((resolve) => {
      server.closeAllConnections();
      server.close(() => resolve());
      store.close();
    });
}

async function expressTarget(): Promise<Target> {
  const path = freshDbPath(dir);
  const store = openSqliteStore(path);
  let runs = 0;
  const app = express();
  // As an application sets it up: the body parser (with its size limit) before the layer.
  app.use(express.json({ limit: LIMIT }));
  app.post('/pay', expressIdempotency(store, { scope: 'global' }), (req, res) => {
    runs++;
    res.status(201).json({ charged: req.body });
  });
  const server = app.listen(0, '127.0.0.1');
  return { path, port: await listening(server), runs: () => runs, close: closer(server, store) };
}

async function honoTarget(): Promise<Target> {
  const path = freshDbPath(dir);
  const store = openSqliteStore(path);
  let runs = 0;
  const app = new Hono();
  // As an application sets it up: HTTP exceptions (the body limit's 413) answer for themselves,
  // a body that is not JSON is the client's fault, anything else is a 500.
  app.onError((error, c) => {
    if (error instanceof HTTPException) return error.getResponse();
    return c.json({ error: error.message }, error instanceof SyntaxError ? 400 : 500);
  });
  app.post(
    '/pay',
    bodyLimit({ maxSize: LIMIT }),
    honoIdempotency(store, { scope: 'global' }),
    async (c) => {
      const body: unknown = await c.req.json();
      runs++;
      return c.json({ charged: body }, 201);
    },
  );
  const server = serve({ fetch: app.fetch, port: 0, hostname: '127.0.0.1' }) as Server;
  return { path, port: await listening(server), runs: () => runs, close: closer(server, store) };
}

async function fastifyTarget(): Promise<Target> {
  const path = freshDbPath(dir);
  const store = openSqliteStore(path);
  let runs = 0;
  // As an application sets it up: Fastify's own JSON parser, with the same size limit.
  const app = Fastify({ bodyLimit: LIMIT, forceCloseConnections: true });
  app.post(
    '/pay',
    { ...fastifyIdempotency(store, { scope: 'global' }) },
    async (request, reply) => {
      runs++;
      reply.code(201);
      return { charged: request.body };
    },
  );
  await app.listen({ port: 0, host: '127.0.0.1' });
  const port = (app.server.address() as AddressInfo).port;
  const close = async () => {
    await app.close();
    store.close();
  };
  return { path, port, runs: () => runs, close };
}

/**
 * Sends one raw HTTP/1.1 request, so header values no client library would send (control
 * characters, NUL, duplicates, bytes that are not ASCII) reach the server. Returns the status.
 */
function raw(port: number, head: string[], body: Buffer | string = ''): Promise<number> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1');
    let reply = '';
    socket.on('data', (chunk: Buffer) => {
      reply += chunk.toString('latin1');
      const match = /^HTTP\/1\.1 (\d{3})/.exec(reply);
      if (match) {
        socket.destroy();
        resolve(Number(match[1]));
      }
    });
    socket.on('error', reject);
    socket.on('close', () => reject(new Error(`no status in ${JSON.stringify(reply)}`)));
    const bytes = Buffer.isBuffer(body) ? body : Buffer.from(body);
    const lines = [
      'POST /pay HTTP/1.1',
      'Host: 127.0.0.1',
      'Connection: close',
      'Content-Type: application/json',
      ...head,
    ];
    if (!head.some((line) => /^(content-length|transfer-encoding):/i.test(line))) {
      lines.push(`Content-Length: ${bytes.length}`);
    }
    socket.write(Buffer.concat([Buffer.from(`${lines.join('\r\n')}\r\n\r\n`, 'latin1'), bytes]));
  });
}

const json = JSON.stringify({ amount: 5 });
// Every case: the request line, headers and body as sent. Each must get a 4xx, run no handler
// and leave the table as it was.
const CASES: [string, string[], Buffer | string][] = [
  ['no key', [], json],
  ['an empty key', ['Idempotency-Key: ""'], json],
  ['a blank key', ['Idempotency-Key:    '], json],
  ['a bare key with a space', ['Idempotency-Key: order 42'], json],
  ['a key of 256 characters', [`Idempotency-Key: "${'k'.repeat(256)}"`], json],
  [
    'a key of 20,000 characters (beyond the header limit)',
    [`Idempotency-Key: "${'k'.repeat(20_000)}"`],
    json,
  ],
  ['a key with a control character', ['Idempotency-Key: "a\u0001b"'], json],
  ['a key with a NUL', ['Idempotency-Key: "a\u0000b"'], json],
  ['a key with DEL', ['Idempotency-Key: "a\u007fb"'], json],
  ['a key with an escape sequence', ['Idempotency-Key: "\u001b[2Jk"'], json],
  ['a key in UTF-8', ['Idempotency-Key: "\u00c3\u00a9"'], json],
  ['a key with parameters', ['Idempotency-Key: "abc";v=1'], json],
  ['an unterminated quoted key', ['Idempotency-Key: "abc'], json],
  ['a bad escape in a quoted key', ['Idempotency-Key: "a\\nb"'], json],
  ['two key headers', ['Idempotency-Key: "a"', 'Idempotency-Key: "b"'], json],
  ['two keys in one header', ['Idempotency-Key: "a", "b"'], json],
  ['two key headers, the second empty', ['Idempotency-Key: k1', 'Idempotency-Key:'], json],
  ['a quoted key split over two headers', ['Idempotency-Key: "a', 'Idempotency-Key: b"'], json],
  ['two key headers of one key', ['Idempotency-Key: k1', 'Idempotency-Key: k1'], json],
  ['a key with a comma', ['Idempotency-Key: k1,'], json],
  ['a body that is not JSON', ['Idempotency-Key: "not-json"'], '{"amount": 5,'],
  ['a body that is a bare word', ['Idempotency-Key: "bare-word"'], 'charge me'],
  [
    'an oversized body',
    ['Idempotency-Key: "huge"'],
    JSON.stringify({ pad: 'x'.repeat(LIMIT * 2) }),
  ],
  [
    'a body longer than its Content-Length says (smuggling)',
    ['Idempotency-Key: "smuggle"', 'Content-Length: 3', 'Transfer-Encoding: chunked'],
    '3\r\n{}\n\r\n0\r\n\r\n',
  ],
  [
    'broken chunked encoding',
    ['Idempotency-Key: "chunks"', 'Transfer-Encoding: chunked'],
    'zz\r\n{}\r\n0\r\n\r\n',
  ],
];

describe.each([
  ['Express', expressTarget],
  ['Hono', honoTarget],
  ['Fastify', fastifyTarget],
])('hostile HTTP requests to %s: a 4xx, no handler run, nothing stored', (_, start) => {
  let target: Target;
  beforeAll(async () => {
    target = await start();
    // One answer already stored, so "nothing changed" also means it was not touched.
    const first = await fetch(`http://127.0.0.1:${target.port}/pay`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'idempotency-key': '"first"' },
      body: json,
    });
    expect(first.status).toBe(201);
  });
  afterAll(() => target.close());

  it.each(CASES)('%s', async (_label, head, body) => {
    const before = readRows(target.path);
    const runs = target.runs();
    const status = await raw(target.port, head, body);
    expect(status).toBeGreaterThanOrEqual(400);
    expect(status).toBeLessThan(500);
    expect(target.runs()).toBe(runs);
    expect(readRows(target.path)).toEqual(before);
  });

  it('the same key with another body: 422, the stored answer untouched', async () => {
    const before = readRows(target.path);
    const status = await raw(
      target.port,
      ['Idempotency-Key: "first"'],
      JSON.stringify({ amount: 6 }),
    );
    expect(status).toBe(422);
    expect(readRows(target.path)).toEqual(before);
  });
});
