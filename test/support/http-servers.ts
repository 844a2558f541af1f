import { once } from 'node:events';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { serve } from '@hono/node-server';
import express from 'express';
import Fastify from 'fastify';
import { Hono } from 'hono';
import type { Step } from '../../src/core/steps.js';
import { expressIdempotency, keepRawBody } from '../../src/http/express.js';
import { fastifyIdempotency } from '../../src/http/fastify.js';
import { fetchIdempotency } from '../../src/http/fetch.js';
import { honoIdempotency } from '../../src/http/hono.js';
import { type IdempotentOptions, idempotencyStep, idempotent } from '../../src/http/index.js';
import { toWire } from '../../src/http/response.js';
import type { LeasedIdempotencyStore } from '../../src/index.js';

/** What the test handler answers: JSON by default, or text, or bytes. */
export interface Answer {
  readonly status: number;
  readonly headers: Record<string, string>;
  readonly kind: 'json' | 'text' | 'binary';
  readonly body: unknown;
}

/**
 * The handler behind every test route: the same logic in every framework. `step` asks the layer
 * for the request's step function (the layer's `steps` option), as the framework's handler does.
 */
export type Behaviour = (body: unknown, path: string, step: () => Step<unknown>) => Promise<Answer>;

/** A running server on 127.0.0.1. */
export interface TestServer {
  readonly url: string;
  close(): Promise<void>;
}

/** Starts a server for `store` with the layer in front of `behave` on `/run` and `/other`. */
export type ServerFactory = (
  store: LeasedIdempotencyStore<unknown>,
  options: IdempotentOptions,
  behave: Behaviour,
) => Promise<TestServer>;

/** An HTTP layer under test: the core behind node:http, or one of the adapters. */
export interface ServerKind {
  readonly name: string;
  readonly start: ServerFactory;
}

// `/things/:id` lets a path the frameworks route alike (`/things/p%61y` and `/things/pay`) reach
// every adapter.
const ROUTES = ['/run', '/other', '/things/:id'];

/** Waits for `server` to listen and answers its URL and a close that ends open connections. */
export async function listening(server: Server): Promise<TestServer> {
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

const startCore: ServerFactory = async (store, options, behave) => {
  const layer = idempotent(store, options);
  const server = createServer(async (req, res) => {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const bytes = Buffer.concat(chunks);
    const path = new URL(req.url ?? '/', 'http://127.0.0.1').pathname;
    const client = req.headers['x-client'];
    try {
      // The layer gets the bytes, as written; the handler the parsed body (BOM dropped).
      const text = new TextDecoder().decode(bytes);
      const body: unknown = text === '' ? undefined : JSON.parse(text);
      const result = await layer.handle(
        {
          method: req.method ?? 'GET',
          path,
          headers: req.headers,
          body: bytes.byteLength === 0 ? undefined : bytes,
          scope: typeof client === 'string' ? client : undefined,
        },
        async (step) => {
          const answer = await behave(body, path, () => {
            if (step === undefined) throw new Error('the layer gave no step function');
            return step;
          });
          return { status: answer.status, headers: answer.headers, body: answer.body as never };
        },
      );
      const wire = toWire(result.response);
      res.writeHead(wire.status, wire.headers);
      res.end(wire.body);
    } catch {
      res.writeHead(500, { 'content-type': 'text/plain' });
      res.end('handler failed');
    }
  });
  server.listen(0, '127.0.0.1');
  return listening(server);
};

const startExpress: ServerFactory = async (store, options, behave) => {
  const app = express();
  app.use(express.json({ verify: keepRawBody }));
  app.all(
    ROUTES,
    expressIdempotency(store, { ...options, scope: (req) => req.header('x-client') }),
    async (req, res) => {
      const answer = await behave(req.body, req.path, () => idempotencyStep(req));
      res.status(answer.status).set(answer.headers);
      if (answer.kind === 'json') res.json(answer.body);
      else
        res.send(answer.kind === 'binary' ? Buffer.from(answer.body as Uint8Array) : answer.body);
    },
  );
  return listening(app.listen(0, '127.0.0.1'));
};

const startHono: ServerFactory = async (store, options, behave) => {
  const app = new Hono();
  app.onError((_error, c) => c.text('handler failed', 500));
  const middleware = honoIdempotency(store, { ...options, scope: (c) => c.req.header('x-client') });
  for (const route of ROUTES) {
    app.all(route, middleware, async (c) => {
      const text = await c.req.text();
      const answer = await behave(text === '' ? undefined : JSON.parse(text), c.req.path, () =>
        idempotencyStep(c),
      );
      const init = { status: answer.status, headers: answer.headers };
      if (answer.kind === 'json') {
        return new Response(JSON.stringify(answer.body), {
          ...init,
          headers: { 'content-type': 'application/json', ...answer.headers },
        });
      }
      return new Response(answer.body as string | Uint8Array, init);
    });
  }
  const server = serve({ fetch: app.fetch, port: 0, hostname: '127.0.0.1' }) as Server;
  return listening(server);
};

const startFastify: ServerFactory = async (store, options, behave) => {
  const app = Fastify({ forceCloseConnections: true });
  const idempotency = fastifyIdempotency(store, {
    ...options,
    scope: (request) => {
      const client = request.headers['x-client'];
      return typeof client === 'string' ? client : undefined;
    },
  });
  app.setErrorHandler((_error, _request, reply) => {
    reply.code(500).type('text/plain').send('handler failed');
  });
  for (const route of ROUTES) {
    app.all(route, { ...idempotency }, async (request, reply) => {
      const answer = await behave(request.body, request.url.split('?', 1)[0] ?? '/', () =>
        idempotencyStep(request),
      );
      reply.code(answer.status).headers(answer.headers);
      if (answer.kind === 'binary') return reply.send(Buffer.from(answer.body as Uint8Array));
      return reply.send(answer.body);
    });
  }
  await app.listen({ port: 0, host: '127.0.0.1' });
  const { port } = app.server.address() as AddressInfo;
  return { url: `http://127.0.0.1:${port}`, close: () => app.close() };
};

/**
 * Serves a Fetch API handler over node:http on 127.0.0.1, with Node's own Request and Response; a
 * handler that throws is answered 500 `handler failed`.
 */
export function serveFetch(handler: (request: Request) => Promise<Response>): Promise<TestServer> {
  const server = createServer(async (req, res) => {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const headers = new Headers();
    for (const [name, value] of Object.entries(req.headers)) {
      for (const item of Array.isArray(value) ? value : [value ?? '']) headers.append(name, item);
    }
    const method = req.method ?? 'GET';
    const request = new Request(`http://127.0.0.1${req.url ?? '/'}`, {
      method,
      headers,
      body: method === 'GET' || method === 'HEAD' ? null : Buffer.concat(chunks),
    });
    let response: Response;
    try {
      response = await handler(request);
    } catch {
      response = new Response('handler failed', {
        status: 500,
        headers: { 'content-type': 'text/plain' },
      });
    }
    res.writeHead(response.status, Object.fromEntries(response.headers));
    res.end(Buffer.from(await response.arrayBuffer()));
  });
  server.listen(0, '127.0.0.1');
  return listening(server);
}

// A Fetch API handler behind node:http, on Node's own Request and Response: what Next.js route
// handlers, Bun.serve and Deno.serve hand to the layer.
const startFetch: ServerFactory = async (store, options, behave) => {
  const withIdempotency = fetchIdempotency(store, {
    ...options,
    scope: (request) => request.headers.get('x-client') ?? undefined,
  });
  const handler = withIdempotency(async (request: Request) => {
    const text = await request.text();
    const answer = await behave(
      text === '' ? undefined : JSON.parse(text),
      new URL(request.url).pathname,
      () => idempotencyStep(request),
    );
    if (answer.kind === 'json') {
      return Response.json(answer.body, { status: answer.status, headers: answer.headers });
    }
    return new Response(answer.body as string | Uint8Array, {
      status: answer.status,
      headers: answer.headers,
    });
  });
  return serveFetch(handler);
};

/** Every HTTP layer the behaviour suite runs against. */
export const serverKinds: readonly ServerKind[] = [
  { name: 'core over node:http', start: startCore },
  { name: 'Express adapter', start: startExpress },
  { name: 'Hono adapter', start: startHono },
  { name: 'Fastify adapter', start: startFastify },
  { name: 'Fetch adapter', start: startFetch },
];
