import { once } from 'node:events';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { serve } from '@hono/node-server';
import express from 'express';
import Fastify from 'fastify';
import { type Context, Hono } from 'hono';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { TransactionRunner } from '../../src/core/transaction-runner.js';
import { expressTransaction } from '../../src/http/express.js';
import { fastifyTransaction } from '../../src/http/fastify.js';
import { fetchTransaction } from '../../src/http/fetch.js';
import { honoTransaction } from '../../src/http/hono.js';
import { ProblemType } from '../../src/http/problems.js';
import type { HttpResponse } from '../../src/http/response.js';
import { isUniqueViolation } from '../function/transactional-suite.js';
import { serveFetch, type TestServer } from '../support/http-servers.js';

/** What a test request pays: `ref` is the primary key of its payment row. */
interface Order {
  readonly ref: string;
  readonly amount: number;
}

/**
 * A database with a `payments (ref PRIMARY KEY, amount)` table and a runner over a store whose
 * keys table is not the dialect's default one (another name or schema). A trigger on that table
 * refuses to record the answer of any key that starts with `refused`, so a recording can fail for
 * real, with the database's own error.
 */
export interface HttpDialect<TX> {
  readonly runner: TransactionRunner<TX>;
  /** Inserts the payment in the transaction: synchronously on better-sqlite3, a promise elsewhere. */
  pay(tx: TX, order: Order): undefined | Promise<unknown>;
  /** The refs of the committed payments. */
  payments(): Promise<string[]>;
  /** The rows of a default keys table beside the store's, or `undefined` when there is none. */
  defaultKeys(): Promise<number | undefined>;
  close(): Promise<void>;
}

/** Opens one dialect for the suite. */
export interface DialectFactory {
  readonly name: string;
  open(): Promise<HttpDialect<never>>;
}

function linger(): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, 5));
}

// The handler of every adapter: pays the order, or answers 409 when its ref is already paid (the
// unique violation caught, as an app does). On an asynchronous dialect it lingers in the
// transaction after paying, so concurrent requests overlap with it.
function handle<TX>(dialect: HttpDialect<TX>, tx: TX, order: Order) {
  const paid = (): HttpResponse => ({ status: 201, body: { paid: order.ref } });
  const conflict = (error: unknown): HttpResponse => {
    if (!isUniqueViolation(error)) throw error;
    return { status: 409, body: { conflict: order.ref } };
  };
  let written: undefined | Promise<unknown>;
  try {
    written = dialect.pay(tx, order);
  } catch (error) {
    return conflict(error);
  }
  if (written === undefined) return paid();
  return written.then(async () => {
    await linger();
    return paid();
  }, conflict);
}

async function listening(server: Server): Promise<TestServer> {
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

type Start = (dialect: HttpDialect<never>) => Promise<TestServer>;

// No error handler of the app's anywhere: the frameworks' defaults, which would send a thrown
// error's message (Fastify) or stack (Express) to the client.
const adapters: readonly { name: string; start: Start }[] = [
  {
    name: 'expressTransaction',
    start: async (dialect) => {
      const app = express();
      app.use(express.json());
      app.post(
        '/payments',
        expressTransaction(dialect.runner, (req, tx) => handle(dialect, tx, req.body as Order), {
          scope: 'global',
        }),
      );
      return listening(app.listen(0, '127.0.0.1'));
    },
  },
  {
    name: 'fastifyTransaction',
    start: async (dialect) => {
      const app = Fastify({ forceCloseConnections: true });
      app.post(
        '/payments',
        fastifyTransaction(
          dialect.runner,
          (request, tx) => handle(dialect, tx, request.body as Order),
          { scope: 'global' },
        ),
      );
      await app.listen({ port: 0, host: '127.0.0.1' });
      const { port } = app.server.address() as AddressInfo;
      return { url: `http://127.0.0.1:${port}`, close: () => app.close() };
    },
  },
  {
    name: 'honoTransaction',
    start: async (dialect) => {
      const app = new Hono();
      app.post(
        '/payments',
        // The body is read in `prepare`, before the transaction, which on better-sqlite3 cannot
        // span an await.
        honoTransaction(dialect.runner, (_c, tx, prepared) => handle(dialect, tx, prepared), {
          scope: 'global',
          prepare: (c: Context) => c.req.json<Order>(),
        }),
      );
      return listening(serve({ fetch: app.fetch, port: 0, hostname: '127.0.0.1' }) as Server);
    },
  },
  {
    name: 'fetchTransaction',
    start: (dialect) =>
      serveFetch(
        fetchTransaction(
          dialect.runner,
          (_request, tx, prepared) => handle(dialect, tx, prepared),
          { scope: 'global', prepare: async (request: Request) => (await request.json()) as Order },
        ),
      ),
  },
];

let counter = 0;

/** A key and ref no other test uses; `refused` ones have their answer refused by the trigger. */
function fresh(prefix = 'k'): string {
  counter += 1;
  return `${prefix}-${process.pid}-${counter}`;
}

function post(url: string, key: string, order: Order): Promise<Response> {
  return fetch(`${url}/payments`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'idempotency-key': `"${key}"` },
    body: JSON.stringify(order),
  });
}

/** The transactional HTTP forms of every adapter, on each of `dialects`. */
export function transactionDialectsSuite(dialects: readonly DialectFactory[]): void {
  describe.each(dialects)('transactional routes on $name', ({ open }) => {
    let dialect: HttpDialect<never>;
    beforeAll(async () => {
      dialect = await open();
    });
    afterAll(async () => dialect?.close());

    describe.each(adapters)('$name', ({ start }) => {
      let server: TestServer;
      beforeAll(async () => {
        server = await start(dialect);
      });
      afterAll(async () => server?.close());
      const row = (key: string) => dialect.runner.store.get(key);

      it('records in the store’s own table and replays from it; nothing in a default keys table', async () => {
        const key = fresh();
        const order = { ref: fresh('r'), amount: 5 };
        const first = await post(server.url, key, order);
        expect(first.status).toBe(201);
        const replay = await post(server.url, key, order);
        expect(replay.status).toBe(201);
        expect(replay.headers.get('idempotent-replayed')).toBe('true');
        expect(await replay.json()).toEqual({ paid: order.ref });
        expect((await dialect.payments()).filter((ref) => ref === order.ref)).toHaveLength(1);
        expect(await row(key)).toMatchObject({ status: 'done' });
        expect([0, undefined]).toContain(await dialect.defaultKeys());
      });

      it.each([2, 16])(
        'answers %i concurrent requests on distinct keys, each recorded',
        async (n) => {
          const calls = Array.from({ length: n }, (_, i) => ({
            key: fresh(),
            order: { ref: fresh('r'), amount: i + 1 },
          }));
          const responses = await Promise.all(
            calls.map((call) => post(server.url, call.key, call.order)),
          );
          const answers = await Promise.all(
            responses.map(async (response) => ({
              status: response.status,
              body: await response.text(),
            })),
          );
          expect(answers).toEqual(
            calls.map((call) => ({ status: 201, body: JSON.stringify({ paid: call.order.ref }) })),
          );
          for (const call of calls) {
            expect(await row(call.key)).toMatchObject({ status: 'done' });
          }
          const paid = new Set(await dialect.payments());
          expect(calls.filter((call) => !paid.has(call.order.ref))).toEqual([]);
        },
      );

      it('stores and replays the 409 of a handler that catches its own unique violation', async () => {
        const taken = { ref: fresh('r'), amount: 1 };
        expect((await post(server.url, fresh(), taken)).status).toBe(201);
        const key = fresh();
        const duplicate = await post(server.url, key, { ...taken, amount: 2 });
        expect(duplicate.status).toBe(409);
        expect(await duplicate.json()).toEqual({ conflict: taken.ref });
        expect(await row(key)).toMatchObject({ status: 'done' });
        const replay = await post(server.url, key, { ...taken, amount: 2 });
        expect(replay.status).toBe(409);
        expect(replay.headers.get('idempotent-replayed')).toBe('true');
        expect(await replay.json()).toEqual({ conflict: taken.ref });
        expect((await dialect.payments()).filter((ref) => ref === taken.ref)).toHaveLength(1);
      });

      it('answers a generic problem, with no SQL, parameters or stack, when the recording fails', async () => {
        const key = fresh('refused');
        const order = { ref: fresh('r'), amount: 3 };
        const response = await post(server.url, key, order);
        expect(response.status).toBe(500);
        expect(response.headers.get('content-type')).toMatch(/^application\/problem\+json/);
        const text = await response.text();
        const body = JSON.parse(text) as Record<string, unknown>;
        expect(Object.keys(body).sort()).toEqual(['detail', 'status', 'title', 'type']);
        expect(body).toMatchObject({ type: ProblemType.answerNotRecorded, status: 500 });
        for (const leak of [
          key,
          order.ref,
          'refused',
          'params',
          'query',
          'update',
          'keys',
          ' at ',
          '/',
        ]) {
          expect(text.toLowerCase()).not.toContain(leak.toLowerCase());
        }
        // Nothing committed: the payment rolled back, the key released for a retry.
        expect(await dialect.payments()).not.toContain(order.ref);
        expect(await row(key)).toBeNull();
      });
    });
  });
}
