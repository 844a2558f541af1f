import { randomBytes } from 'node:crypto';
import express from 'express';
import { afterEach, describe, expect, it } from 'vitest';
import type { Keyring } from '../../src/core/encryption.js';
import { expressIdempotency, keepRawBody } from '../../src/http/express.js';
import { fetchIdempotency } from '../../src/http/fetch.js';
import { openSqliteStore, type SqliteIdempotencyStore } from '../../src/sqlite/index.js';
import { listening, serveFetch } from '../support/http-servers.js';
import { freshDbPath, tempDir } from '../support/temp.js';

// An answer sealed under a key id the keyring no longer has (docs/security.md, key rotation): a
// retry gets a 500 problem that names neither the key id nor any key, and the handler does not
// run a second time.

const dir = tempDir('idem-sealed-answer-');
const KEY = 'sealed-answer-1';
const RETIRED_ID = 'retired-2026-11';
const CURRENT_ID = 'current-2026-12';
const retiredKey = randomBytes(32);
const currentKey = randomBytes(32);
const beforeRotation: Keyring = { keys: { [RETIRED_ID]: retiredKey }, current: RETIRED_ID };
// The retired key was dropped from the keyring before its rows were re-sealed.
const afterRotation: Keyring = { keys: { [CURRENT_ID]: currentKey }, current: CURRENT_ID };

let runs = 0;
const cleanups: (() => Promise<void> | void)[] = [];

afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
  runs = 0;
});

function open(path: string, encryption: Keyring): SqliteIdempotencyStore<unknown> {
  const store = openSqliteStore(path, { encryption });
  cleanups.push(() => store.close());
  return store;
}

interface Served {
  readonly url: string;
  close(): Promise<void>;
}

async function serveExpress(store: SqliteIdempotencyStore<unknown>): Promise<Served> {
  const app = express();
  app.use(express.json({ verify: keepRawBody }));
  app.post('/pay', expressIdempotency(store, { scope: 'global' }), (_req, res) => {
    runs += 1;
    res.status(201).json({ id: 'p_1', card: '4242' });
  });
  const server = await listening(app.listen(0, '127.0.0.1'));
  return { url: `${server.url}/pay`, close: () => server.close() };
}

async function serveFetchHandler(store: SqliteIdempotencyStore<unknown>): Promise<Served> {
  const handler = fetchIdempotency(store, { scope: 'global' })(async () => {
    runs += 1;
    return Response.json({ id: 'p_1', card: '4242' }, { status: 201 });
  });
  const server = await serveFetch(handler);
  return { url: `${server.url}/pay`, close: () => server.close() };
}

function post(url: string): Promise<Response> {
  return fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'idempotency-key': KEY },
    body: '{"amount":1000}',
  });
}

const adapters = { Express: serveExpress, Fetch: serveFetchHandler };

describe.each(Object.entries(adapters))('%s: an answer sealed under a missing key', (_, serve) => {
  it('answers a 500 problem that names no key, without running the handler again', async () => {
    const path = freshDbPath(dir);
    const first = await serve(open(path, beforeRotation));
    const answered = await post(first.url);
    expect(answered.status).toBe(201);
    expect(await answered.json()).toEqual({ id: 'p_1', card: '4242' });
    await first.close();

    const rotated = await serve(open(path, afterRotation));
    cleanups.push(() => rotated.close());
    const retry = await post(rotated.url);
    expect(retry.status).toBe(500);
    expect(retry.headers.get('content-type')).toMatch(/^application\/problem\+json/);
    const text = await retry.text();
    expect(JSON.parse(text)).toMatchObject({
      type: 'urn:drizzle-idempotency:problem:answer-unreadable',
      status: 500,
    });
    for (const secret of [
      RETIRED_ID,
      CURRENT_ID,
      retiredKey.toString('hex'),
      retiredKey.toString('base64'),
      currentKey.toString('hex'),
      currentKey.toString('base64'),
      '4242',
    ]) {
      expect(text).not.toContain(secret);
    }
    expect(text).not.toMatch(/\.ts|\.js|at \w+ \(/);
    expect(runs).toBe(1);
  });
});
