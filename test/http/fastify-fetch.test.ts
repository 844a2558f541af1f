import type { AddressInfo } from 'node:net';
import Fastify, { type FastifyInstance } from 'fastify';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { fastifyIdempotency } from '../../src/http/fastify.js';
import { fetchIdempotency } from '../../src/http/fetch.js';
import { KeyMissingError, KeyReusedError } from '../../src/http/index.js';
import { openSqliteStore, type SqliteIdempotencyStore } from '../../src/sqlite/index.js';
import { failingFinish } from '../support/failing-store.js';
import { freshDbPath, tempDir } from '../support/temp.js';

const dir = tempDir('idem-fastify-fetch-');
let store: SqliteIdempotencyStore<unknown>;
let app: FastifyInstance | undefined;

function post(url: string, key: string | undefined, body: unknown): Promise<Response> {
  return fetch(url, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      ...(key === undefined ? {} : { 'idempotency-key': key }),
    },
    body: JSON.stringify(body),
  });
}

function request(key: string | undefined, body: unknown): Request {
  return new Request('http://localhost/pay', {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      ...(key === undefined ? {} : { 'idempotency-key': key }),
    },
    body: JSON.stringify(body),
  });
}

async function listen(instance: FastifyInstance): Promise<string> {
  app = instance;
  await instance.listen({ port: 0, host: '127.0.0.1' });
  return `http://127.0.0.1:${(instance.server.address() as AddressInfo).port}`;
}

beforeEach(() => {
  store = openSqliteStore(freshDbPath(dir));
});

afterEach(async () => {
  await app?.close();
  app = undefined;
  store.close();
});

describe('Fastify adapter', () => {
  it('covers every route of a plugin scope through addHook', async () => {
    let runs = 0;
    const instance = Fastify();
    await instance.register(async (scope) => {
      const idempotency = fastifyIdempotency(store, { scope: 'global' });
      scope.addHook('preHandler', idempotency.preHandler);
      scope.addHook('onSend', idempotency.onSend);
      scope.addHook('onError', idempotency.onError);
      scope.post('/pay', async (req, reply) => {
        runs += 1;
        reply.code(201);
        return { runs, body: req.body };
      });
    });
    instance.post('/open', async () => ({ open: true }));
    const base = await listen(instance);
    const first = await post(`${base}/pay`, 'k1', { amount: 5 });
    expect(first.status).toBe(201);
    const replay = await post(`${base}/pay`, 'k1', { amount: 5 });
    expect(replay.headers.get('idempotent-replayed')).toBe('true');
    expect(await replay.json()).toEqual({ runs: 1, body: { amount: 5 } });
    expect((await post(`${base}/open`, undefined, {})).status).toBe(200);
    expect(runs).toBe(1);
  });

  it('lets onError shape problems, before the handler and after it, keeping earlier headers', async () => {
    const seen: unknown[] = [];
    const instance = Fastify();
    const idempotency = fastifyIdempotency(failingFinish(store), {
      scope: 'global',
      onError: (problem) => {
        seen.push(problem);
        return { status: problem.status, body: { error: problem.code } };
      },
    });
    instance.addHook('onRequest', async (_req, reply) => {
      reply.header('x-request-id', 'r1');
    });
    instance.post('/pay', { ...idempotency }, async (_req, reply) => {
      reply.code(201).header('content-length', '11').header('location', '/payments/p1');
      return '{"id":"p1"}';
    });
    const base = await listen(instance);
    const missing = await post(`${base}/pay`, undefined, {});
    expect(missing.status).toBe(400);
    expect(await missing.json()).toEqual({ error: 'IDEMPOTENCY_KEY_MISSING' });
    const unrecorded = await post(`${base}/pay`, 'k1', {});
    expect(unrecorded.status).toBe(500);
    expect(await unrecorded.json()).toEqual({ error: 'IDEMPOTENCY_ANSWER_NOT_RECORDED' });
    expect(unrecorded.headers.get('x-request-id')).toBe('r1');
    expect(unrecorded.headers.get('location')).toBeNull();
    expect(missing.headers.get('x-request-id')).toBe('r1');
    expect(store.get('k1')?.status).toBe('pending');
    expect(seen[0]).toBeInstanceOf(KeyMissingError);
  });
});

describe('Fetch adapter', () => {
  it('lets the handler read the body and passes the extra arguments through', async () => {
    const withIdempotency = fetchIdempotency(store, { scope: 'global' });
    const handler = withIdempotency(async (req: Request, context: { params: { id: string } }) =>
      Response.json({ echo: await req.json(), id: context.params.id }, { status: 201 }),
    );
    const response = await handler(request('k1', { amount: 5 }), { params: { id: 'p1' } });
    expect(response.status).toBe(201);
    expect(await response.json()).toEqual({ echo: { amount: 5 }, id: 'p1' });
    const replay = await handler(request('k1', { amount: 5 }), { params: { id: 'p1' } });
    expect(replay.headers.get('idempotent-replayed')).toBe('true');
  });

  it('lets onError answer problems, with the typed problem', async () => {
    const seen: unknown[] = [];
    const handler = fetchIdempotency(store, {
      scope: 'global',
      onError: (problem, req) => {
        seen.push(problem);
        return { status: problem.status, body: { error: problem.code, method: req.method } };
      },
    })(async () => Response.json({ ok: true }, { status: 201 }));
    expect(await (await handler(request(undefined, {}))).json()).toEqual({
      error: 'IDEMPOTENCY_KEY_MISSING',
      method: 'POST',
    });
    expect((await handler(request('k1', { a: 1 }))).status).toBe(201);
    const reused = await handler(request('k1', { a: 2 }));
    expect(reused.status).toBe(422);
    expect(seen[0]).toBeInstanceOf(KeyMissingError);
    expect(seen[1]).toBeInstanceOf(KeyReusedError);
  });

  it('releases the key and rethrows when the handler throws', async () => {
    const handler = fetchIdempotency(store, { scope: 'global' })(async () => {
      throw new Error('boom');
    });
    await expect(handler(request('k1', {}))).rejects.toThrow('boom');
    expect(store.get('k1')).toBeNull();
  });
});
