import { once } from 'node:events';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { serve } from '@hono/node-server';
import express from 'express';
import { Hono } from 'hono';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { expressIdempotency } from '../../src/http/express.js';
import { honoIdempotency } from '../../src/http/hono.js';
import { KeyMissingError, KeyReusedError } from '../../src/http/index.js';
import { openSqliteStore, type SqliteIdempotencyStore } from '../../src/sqlite/index.js';
import { failingFinish } from '../support/failing-store.js';
import { freshDbPath, tempDir } from '../support/temp.js';

const dir = tempDir('idem-adapters-');
let store: SqliteIdempotencyStore<unknown>;
let server: Server | undefined;

async function listen(started: Server): Promise<string> {
  server = started;
  if (!started.listening) await once(started, 'listening');
  return `http://127.0.0.1:${(started.address() as AddressInfo).port}`;
}

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

beforeEach(() => {
  store = openSqliteStore(freshDbPath(dir));
});

afterEach(async () => {
  const running = server;
  server = undefined;
  if (running) {
    running.closeAllConnections();
    await new Promise((resolve) => running.close(resolve));
  }
  store.close();
});

describe('Express adapter', () => {
  it('lets onError answer problems in its own format', async () => {
    const app = express();
    app.use(express.json());
    app.post(
      '/pay',
      expressIdempotency(failingFinish(store), {
        onError: (problem, _req, res) => {
          res.status(problem.status).json({ error: problem.code, kind: problem.constructor.name });
        },
      }),
      (_req, res) => {
        res.status(201).json({ id: 1 });
      },
    );
    const url = `${await listen(app.listen(0, '127.0.0.1'))}/pay`;
    const missing = await post(url, undefined, {});
    expect(missing.status).toBe(400);
    expect(await missing.json()).toEqual({
      error: 'IDEMPOTENCY_KEY_MISSING',
      kind: 'KeyMissingError',
    });
    const unrecorded = await post(url, 'k1', {});
    expect(unrecorded.status).toBe(500);
    expect(await unrecorded.json()).toEqual({
      error: 'IDEMPOTENCY_ANSWER_NOT_RECORDED',
      kind: 'AnswerNotRecordedError',
    });
    expect(store.get('k1')?.status).toBe('pending');
  });

  it('fingerprints the full path of a mounted router', async () => {
    const router = express.Router();
    router.post('/pay', expressIdempotency(store), (_req, res) => {
      res.status(201).json({ ok: true });
    });
    const app = express();
    app.use(express.json());
    app.use('/v1', router);
    app.use('/v2', router);
    const base = await listen(app.listen(0, '127.0.0.1'));
    expect((await post(`${base}/v1/pay`, 'k1', {})).status).toBe(201);
    expect((await post(`${base}/v2/pay`, 'k1', {})).status).toBe(422);
  });

  it('passes a store failure to the error handler without running the route', async () => {
    let runs = 0;
    const app = express();
    app.use(express.json());
    app.post('/pay', expressIdempotency(store), (_req, res) => {
      runs += 1;
      res.json({});
    });
    const url = `${await listen(app.listen(0, '127.0.0.1'))}/pay`;
    store.close();
    expect((await post(url, 'k1', {})).status).toBe(500);
    expect(runs).toBe(0);
  });
});

describe('Hono adapter', () => {
  it('lets onError answer problems, with the typed problem', async () => {
    const seen: unknown[] = [];
    const app = new Hono();
    app.use(
      '/pay',
      honoIdempotency(store, {
        onError: (problem, c) => {
          seen.push(problem);
          return c.json({ error: problem.code }, problem.status as 400);
        },
      }),
    );
    app.post('/pay', async (c) => c.json(await c.req.json(), 201));
    const base = await listen(
      serve({ fetch: app.fetch, port: 0, hostname: '127.0.0.1' }) as Server,
    );
    const missing = await post(`${base}/pay`, undefined, {});
    expect(await missing.json()).toEqual({ error: 'IDEMPOTENCY_KEY_MISSING' });
    expect((await post(`${base}/pay`, 'k1', { a: 1 })).status).toBe(201);
    const reused = await post(`${base}/pay`, 'k1', { a: 2 });
    expect(reused.status).toBe(422);
    expect(seen[0]).toBeInstanceOf(KeyMissingError);
    expect(seen[1]).toBeInstanceOf(KeyReusedError);
  });

  it('lets the handler read the JSON body the fingerprint already read', async () => {
    const app = new Hono();
    app.post('/pay', honoIdempotency(store), async (c) =>
      c.json({ echo: await c.req.json() }, 201),
    );
    const base = await listen(
      serve({ fetch: app.fetch, port: 0, hostname: '127.0.0.1' }) as Server,
    );
    const response = await post(`${base}/pay`, 'k1', { amount: 5 });
    expect(await response.json()).toEqual({ echo: { amount: 5 } });
  });
});
