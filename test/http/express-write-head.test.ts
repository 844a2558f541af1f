import express, { type Response } from 'express';
import { afterEach, describe, expect, it } from 'vitest';
import { expressIdempotency } from '../../src/http/express.js';
import { openSqliteStore, type SqliteIdempotencyStore } from '../../src/sqlite/index.js';
import { listening, type TestServer } from '../support/http-servers.js';
import { freshDbPath, tempDir } from '../support/temp.js';

const dir = tempDir('idem-write-head-');
const BODY = '{"id":"p_1"}';

let store: SqliteIdempotencyStore<unknown> | undefined;
let server: TestServer | undefined;

afterEach(async () => {
  await server?.close();
  store?.close();
  server = undefined;
  store = undefined;
});

// With `x-powered-by` off, no header is set before the handler's `writeHead`: Node then writes the
// headers it is given straight into the header block, where `getHeaders()` does not see them.
async function start(
  answer: (res: Response) => void,
): Promise<{ url: string; runs: () => number }> {
  store = openSqliteStore(freshDbPath(dir));
  let runs = 0;
  const app = express();
  app.disable('x-powered-by');
  app.post('/payments', expressIdempotency(store), (_req, res) => {
    runs += 1;
    answer(res);
  });
  server = await listening(app.listen(0, '127.0.0.1'));
  return { url: server.url, runs: () => runs };
}

function post(url: string): Promise<globalThis.Response> {
  return fetch(`${url}/payments`, {
    method: 'POST',
    headers: { 'idempotency-key': '"k1"' },
    redirect: 'manual',
  });
}

describe('Express res.writeHead(status, headers) with no header set before it', () => {
  it.each([
    [
      'an object',
      (res: Response) => {
        res.writeHead(201, { location: '/payments/p_1', 'content-type': 'application/json' });
        res.end(BODY);
      },
    ],
    [
      'a reason and an object',
      (res: Response) => {
        res.writeHead(201, 'Created', {
          Location: '/payments/p_1',
          'Content-Type': 'application/json',
        });
        res.end(BODY);
      },
    ],
    [
      'a flat array',
      (res: Response) => {
        res.writeHead(201, ['location', '/payments/p_1', 'content-type', 'application/json']);
        res.end(BODY);
      },
    ],
  ])('given %s: the replay carries its Location and content type', async (_name, answer) => {
    const { url, runs } = await start(answer);
    const first = await post(url);
    expect(first.status).toBe(201);
    expect(first.headers.get('location')).toBe('/payments/p_1');
    expect(first.headers.get('content-type')).toBe('application/json');
    expect(await first.text()).toBe(BODY);

    const replay = await post(url);
    expect(runs()).toBe(1);
    expect(replay.headers.get('idempotent-replayed')).toBe('true');
    expect(replay.status).toBe(201);
    expect(replay.headers.get('location')).toBe('/payments/p_1');
    expect(replay.headers.get('content-type')).toBe('application/json');
    expect(await replay.text()).toBe(BODY);
  });
});
