import { once } from 'node:events';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { PGlite } from '@electric-sql/pglite';
import { serve } from '@hono/node-server';
import { sql } from 'drizzle-orm';
import { drizzle as drizzlePglite } from 'drizzle-orm/pglite';
import express from 'express';
import { Hono } from 'hono';
import { afterAll, describe, expect, it } from 'vitest';
import { expressTransaction } from '../../src/http/express.js';
import { honoTransaction } from '../../src/http/hono.js';
import { libsqlTransaction, openLibsqlStore } from '../../src/libsql/index.js';
import { applyPgMigrations, PgIdempotencyStore, pgTransaction } from '../../src/pg/index.js';
import { openSqliteStore, sqliteTransaction } from '../../src/sqlite/index.js';
import { fileUrl } from '../support/libsql-harness.js';
import { freshDbPath, tempDir } from '../support/temp.js';
import { deferred, until } from '../support/waiting.js';

const dir = tempDir('idem-http-tx-');

async function listening(server: Server): Promise<string> {
  if (!server.listening) await once(server, 'listening');
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

function post(url: string, key: string, body: object): Promise<Response> {
  return fetch(`${url}/payments`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'idempotency-key': `"${key}"` },
    body: JSON.stringify(body),
  });
}

describe('expressTransaction on SQLite: the writes and the answer commit together', () => {
  const store = openSqliteStore(freshDbPath(dir));
  store.db.run(sql`CREATE TABLE payments (id INTEGER PRIMARY KEY, amount INTEGER NOT NULL)`);
  const payments = () => store.db.all<{ amount: number }>(sql`SELECT amount FROM payments`);
  let clock = 1000;
  let stall: Promise<void> | undefined;
  const app = express();
  app.use(express.json());
  app.post(
    '/payments',
    expressTransaction(
      sqliteTransaction(store),
      (req, tx) => {
        const { amount, answer } = req.body as { amount: number; answer?: number };
        tx.run(sql`INSERT INTO payments (amount) VALUES (${amount})`);
        if (answer === 0) throw new Error('the handler failed after writing');
        // better-sqlite3 cannot keep the transaction open across an await: refused, rolled back.
        if (answer === -1) return Promise.resolve({ status: 201, body: { amount } });
        return { status: answer ?? 201, body: { amount } };
      },
      { scope: 'global', now: () => clock, leaseSeconds: 30, prepare: () => stall },
    ),
  );
  app.use((_error: unknown, _req: express.Request, res: express.Response, _next: unknown) => {
    res.status(500).json({ failed: true });
  });
  const server = app.listen(0, '127.0.0.1');
  afterAll(() => {
    server.closeAllConnections();
    server.close();
    store.close();
  });

  it('commits the row and the answer; a retry replays it without a second row', async () => {
    const url = await listening(server);
    const first = await post(url, 'ok', { amount: 100 });
    expect(first.status).toBe(201);
    const retry = await post(url, 'ok', { amount: 100 });
    expect(retry.status).toBe(201);
    expect(retry.headers.get('idempotent-replayed')).toBe('true');
    expect(await retry.json()).toEqual({ amount: 100 });
    expect(payments()).toEqual([{ amount: 100 }]);
    expect(store.get('ok')?.status).toBe('done');
  });

  it('a handler that throws after writing leaves no row and releases the key', async () => {
    const url = await listening(server);
    const failed = await post(url, 'throws', { amount: 7, answer: 0 });
    expect(failed.status).toBe(500);
    expect(payments().filter((row) => row.amount === 7)).toEqual([]);
    expect(store.get('throws')).toBeNull();
  });

  it('an answer that is not stored (503) rolls the row back and releases the key', async () => {
    const url = await listening(server);
    const unavailable = await post(url, 'busy', { amount: 8, answer: 503 });
    expect(unavailable.status).toBe(503);
    expect(payments().filter((row) => row.amount === 8)).toEqual([]);
    expect(store.get('busy')).toBeNull();
  });

  it('an async handler is refused on SQLite: no row, the key released', async () => {
    const url = await listening(server);
    expect((await post(url, 'async', { amount: 11, answer: -1 })).status).toBe(500);
    expect(payments().filter((row) => row.amount === 11)).toEqual([]);
    expect(store.get('async')).toBeNull();
  });

  it('a stalled owner taken over after its lease rolls back whole: one row, one answer', async () => {
    const url = await listening(server);
    const gate = deferred();
    stall = gate.promise;
    const stalled = post(url, 'slow', { amount: 9 });
    await expect.poll(() => store.get('slow')?.status, { timeout: 10_000 }).toBe('pending');
    const first = store.get('slow')?.fencingToken as number;
    stall = undefined;
    clock += 31;
    const takeover = await post(url, 'slow', { amount: 9 });
    expect(takeover.status).toBe(201);
    gate.resolve();
    const late = await stalled;
    expect(late.status).toBe(409);
    expect(((await late.json()) as { type: string }).type).toMatch(/request-superseded$/);
    expect(payments().filter((row) => row.amount === 9)).toEqual([{ amount: 9 }]);
    expect(store.get('slow')?.fencingToken).toBeGreaterThan(first);
  });

  it('a concurrent duplicate gets 409 while the owner works, without waiting on a lock', async () => {
    const url = await listening(server);
    const gate = deferred();
    stall = gate.promise;
    const first = post(url, 'dup', { amount: 10 });
    await expect.poll(() => store.get('dup')?.status, { timeout: 10_000 }).toBe('pending');
    stall = undefined;
    expect((await post(url, 'dup', { amount: 10 })).status).toBe(409);
    gate.resolve();
    expect((await first).status).toBe(201);
  });
});

describe('honoTransaction on PostgreSQL (PGlite): async handlers in one transaction', () => {
  const pglite = new PGlite();
  const db = drizzlePglite({ client: pglite });
  const schema = 'http_tx';
  let ready: Promise<PgIdempotencyStore<unknown>> | undefined;
  const setup = () => {
    ready ??= (async () => {
      await applyPgMigrations(db, { schema });
      await db.execute(sql.raw(`CREATE TABLE ${schema}.payments (amount integer NOT NULL)`));
      return new PgIdempotencyStore(db, { schema });
    })();
    return ready;
  };
  let server: ReturnType<typeof serve> | undefined;
  afterAll(async () => {
    server?.close();
    await pglite.close();
  });

  async function start(): Promise<{ url: string; store: PgIdempotencyStore<unknown> }> {
    const store = await setup();
    if (!server) {
      const app = new Hono();
      app.post(
        '/payments',
        honoTransaction(
          pgTransaction(store),
          async (c, tx) => {
            const { amount, answer } = (await c.req.json()) as { amount: number; answer?: number };
            await tx.execute(
              sql`INSERT INTO ${sql.identifier(schema)}.payments (amount) VALUES (${amount})`,
            );
            if (answer === 0) throw new Error('the handler failed after writing');
            return { status: answer ?? 201, body: { amount } };
          },
          { scope: 'global' },
        ),
      );
      app.onError((_error, c) => c.json({ failed: true }, 500));
      server = serve({ fetch: app.fetch, port: 0, hostname: '127.0.0.1' });
    }
    return { url: await listening(server as Server), store };
  }

  const amounts = async (amount: number) =>
    (
      await db.execute<{ amount: number }>(
        sql`SELECT amount FROM ${sql.identifier(schema)}.payments WHERE amount = ${amount}`,
      )
    ).rows;

  it('commits the row and the answer; a retry replays it', async () => {
    const { url, store } = await start();
    expect((await post(url, 'ok', { amount: 100 })).status).toBe(201);
    const retry = await post(url, 'ok', { amount: 100 });
    expect(retry.headers.get('idempotent-replayed')).toBe('true');
    expect(await amounts(100)).toEqual([{ amount: 100 }]);
    expect((await store.get('ok'))?.status).toBe('done');
  });

  it('a handler that throws after writing leaves no row and releases the key', async () => {
    const { url, store } = await start();
    expect((await post(url, 'throws', { amount: 7, answer: 0 })).status).toBe(500);
    expect(await amounts(7)).toEqual([]);
    expect(await store.get('throws')).toBeNull();
  });

  it('an answer that is not stored (503) rolls the row back and releases the key', async () => {
    const { url, store } = await start();
    expect((await post(url, 'busy', { amount: 8, answer: 503 })).status).toBe(503);
    expect(await amounts(8)).toEqual([]);
    expect(await store.get('busy')).toBeNull();
  });
});

describe('honoTransaction on libSQL: the transaction holds the write lock, writes queue behind it', () => {
  it('queues lease renewals behind the transaction instead of blocking on its lock', async () => {
    const store = await openLibsqlStore(fileUrl(freshDbPath(dir)));
    await store.db.run(sql`CREATE TABLE payments (amount INTEGER NOT NULL)`);
    let renewals = 0;
    let failed = 0;
    const claims: number[] = [];
    const counting = new Proxy(store, {
      get(target, property) {
        const value = Reflect.get(target, property);
        if (property === 'acquire') {
          return async (...args: Parameters<typeof store.acquire>) => {
            const result = await store.acquire(...args);
            if (result.status === 'acquired') claims.push(result.fencingToken);
            return result;
          };
        }
        if (property === 'renew') {
          return (...args: Parameters<typeof store.renew>) => {
            renewals += 1;
            return store.renew(...args).catch((error: unknown) => {
              failed += 1;
              throw error;
            });
          };
        }
        return typeof value === 'function' ? value.bind(target) : value;
      },
    });
    const app = new Hono();
    app.post(
      '/payments',
      honoTransaction(
        libsqlTransaction(counting),
        async (_c, tx) => {
          await tx.run(sql`INSERT INTO payments (amount) VALUES (5)`);
          // Stay in the transaction, holding the write lock, until several renewals have been
          // sent (one per heartbeat, a third of the lease each): they queue behind the lock.
          await until(() => renewals >= 3);
          return { status: 201, body: { amount: 5 } };
        },
        { scope: 'global', leaseSeconds: 0.15 },
      ),
    );
    const server = serve({ fetch: app.fetch, port: 0, hostname: '127.0.0.1' });
    try {
      const url = await listening(server as Server);
      expect((await post(url, 'locked', { amount: 5 })).status).toBe(201);
      // Without the client's write queue, each renewal would have waited for the lock on the
      // event loop itself, until the busy timeout and SQLITE_BUSY.
      expect(renewals).toBeGreaterThan(0);
      expect(failed).toBe(0);
      // Claimed once and never taken over: a takeover would have raised the token past the claim's.
      expect(claims).toHaveLength(1);
      expect(await store.get('locked')).toMatchObject({ status: 'done', fencingToken: claims[0] });
    } finally {
      server.close();
      await store.close();
    }
  });
});
