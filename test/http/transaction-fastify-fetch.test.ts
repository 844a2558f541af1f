import type { AddressInfo } from 'node:net';
import { PGlite } from '@electric-sql/pglite';
import { sql } from 'drizzle-orm';
import { drizzle as drizzlePglite } from 'drizzle-orm/pglite';
import Fastify from 'fastify';
import { afterAll, describe, expect, it } from 'vitest';
import type { TransactionRunner } from '../../src/core/transaction-runner.js';
import { fastifyTransaction } from '../../src/http/fastify.js';
import { fetchTransaction } from '../../src/http/fetch.js';
import type { IdempotentOptions } from '../../src/http/index.js';
import type { HttpResponse } from '../../src/http/response.js';
import {
  applyPgMigrations,
  type PgHandlerTransaction,
  PgIdempotencyStore,
  pgTransaction,
} from '../../src/pg/index.js';
import {
  openSqliteStore,
  type SqliteHandlerTransaction,
  sqliteTransaction,
} from '../../src/sqlite/index.js';
import { serveFetch, type TestServer } from '../support/http-servers.js';
import { freshDbPath, tempDir } from '../support/temp.js';
import { deferred } from '../support/waiting.js';

const dir = tempDir('idem-http-tx-fx-');

/** What a test request asks of the handler: the amount to pay and, optionally, its answer. */
interface Order {
  readonly amount: number;
  /** A status to answer, 0 to throw after writing. */
  readonly answer?: number;
}

/** A database with a payments table and a runner whose transactions write to it. */
interface Database<TX> {
  readonly runner: TransactionRunner<TX>;
  /** Resolves once the keys and payments tables exist. */
  readonly ready: Promise<void>;
  /** Writes a payment in the transaction: synchronously on SQLite, a promise on PostgreSQL. */
  pay(tx: TX, run: number, amount: number): undefined | Promise<unknown>;
  runs(amount: number): Promise<number[]>;
  keyRow(key: string): Promise<{ status: string; fencingToken: number } | null>;
  close(): Promise<void>;
}

function sqliteDatabase(): Database<SqliteHandlerTransaction> {
  const store = openSqliteStore(freshDbPath(dir));
  store.db.run(sql`CREATE TABLE payments (run INTEGER NOT NULL, amount INTEGER NOT NULL)`);
  return {
    runner: sqliteTransaction(store),
    ready: Promise.resolve(),
    pay(tx, run, amount) {
      tx.run(sql`INSERT INTO payments (run, amount) VALUES (${run}, ${amount})`);
      return undefined;
    },
    async runs(amount) {
      return store.db
        .all<{ run: number }>(sql`SELECT run FROM payments WHERE amount = ${amount}`)
        .map((row) => row.run);
    },
    async keyRow(key) {
      return store.get(key);
    },
    async close() {
      store.close();
    },
  };
}

function pgliteDatabase(): Database<PgHandlerTransaction> {
  const pglite = new PGlite();
  const db = drizzlePglite({ client: pglite });
  const schema = 'http_tx_fx';
  const table = sql`${sql.identifier(schema)}.payments`;
  const store = new PgIdempotencyStore(db, { schema });
  const ready = (async () => {
    await applyPgMigrations(db, { schema });
    await db.execute(sql`CREATE TABLE ${table} (run integer NOT NULL, amount integer NOT NULL)`);
  })();
  const runner = pgTransaction(store);
  return {
    runner,
    ready,
    pay: (tx, run, amount) =>
      tx.execute(sql`INSERT INTO ${table} (run, amount) VALUES (${run}, ${amount})`),
    async runs(amount) {
      await ready;
      const { rows } = await db.execute<{ run: number }>(
        sql`SELECT run FROM ${table} WHERE amount = ${amount}`,
      );
      return rows.map((row) => row.run);
    },
    keyRow: (key) => store.get(key),
    async close() {
      await ready;
      await pglite.close();
    },
  };
}

/**
 * The state a server shares with its test: the clock, the gate a request sent with `x-stall`
 * waits on after its key is claimed and before its transaction opens, and the handler's runs.
 */
interface Control {
  clock: number;
  gate: Promise<void>;
  runs: number;
}

// The handler of both adapters: writes a payment numbered by its run, then answers as asked.
function handle<TX>(database: Database<TX>, control: Control, tx: TX, order: Order) {
  control.runs += 1;
  const run = control.runs;
  const answer = (): HttpResponse => {
    if (order.answer === 0) throw new Error('the handler failed after writing');
    return { status: order.answer ?? 201, body: { run } };
  };
  const written = database.pay(tx, run, order.amount);
  return written === undefined ? answer() : written.then(answer);
}

type Start = <TX>(
  database: Database<TX>,
  control: Control,
  options: IdempotentOptions,
) => Promise<TestServer>;

const startFastify: Start = async (database, control, options) => {
  const app = Fastify();
  app.post(
    '/payments',
    fastifyTransaction(
      database.runner,
      (request, tx) => handle(database, control, tx, request.body as Order),
      {
        scope: 'global',
        ...options,
        prepare: (request) => (request.headers['x-stall'] ? control.gate : undefined),
      },
    ),
  );
  app.setErrorHandler((_error, _request, reply) => reply.code(500).send({ failed: true }));
  await app.listen({ port: 0, host: '127.0.0.1' });
  const { port } = app.server.address() as AddressInfo;
  return { url: `http://127.0.0.1:${port}`, close: () => app.close() };
};

const startFetch: Start = (database, control, options) =>
  serveFetch(
    fetchTransaction(
      database.runner,
      (_request, tx, prepared) => handle(database, control, tx, prepared),
      {
        scope: 'global',
        ...options,
        // The body is read before the transaction, which on SQLite cannot span an await.
        prepare: async (request: Request) => {
          if (request.headers.has('x-stall')) await control.gate;
          return (await request.json()) as Order;
        },
      },
    ),
  );

function post(url: string, key: string, order: Order, stall = false): Promise<Response> {
  return fetch(`${url}/payments`, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      'idempotency-key': `"${key}"`,
      ...(stall ? { 'x-stall': '1' } : {}),
    },
    body: JSON.stringify(order),
  });
}

const adapters: readonly { name: string; start: Start }[] = [
  { name: 'fastifyTransaction', start: startFastify },
  { name: 'fetchTransaction', start: startFetch },
];
const databases: readonly { name: string; open: () => Database<never> }[] = [
  { name: 'a SQLite file', open: sqliteDatabase as () => Database<never> },
  { name: 'PostgreSQL (PGlite)', open: pgliteDatabase as () => Database<never> },
];

describe.each(adapters)('$name', ({ start }) => {
  it('answers 404 to a request it does not cover (no key, not required): nothing is written', async () => {
    const database = sqliteDatabase();
    const control: Control = { clock: 1000, gate: Promise.resolve(), runs: 0 };
    const server = await start(database, control, { required: false });
    try {
      const unkeyed = await fetch(`${server.url}/payments`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ amount: 5 }),
      });
      expect(unkeyed.status).toBe(404);
      expect(control.runs).toBe(0);
      expect(await database.runs(5)).toEqual([]);
    } finally {
      await server.close();
      await database.close();
    }
  });

  describe.each(databases)('on $name: the writes and the answer commit together', ({ open }) => {
    const database = open();
    const control: Control = { clock: 1000, gate: Promise.resolve(), runs: 0 };
    let server: Promise<TestServer> | undefined;
    const url = async () => {
      server ??= database.ready.then(() =>
        start(database, control, { now: () => control.clock, leaseSeconds: 30 }),
      );
      return (await server).url;
    };
    afterAll(async () => {
      await (await server)?.close();
      await database.close();
    });

    it('commits the row and the answer; a retry replays it without a second row', async () => {
      const base = await url();
      const first = await post(base, 'ok', { amount: 100 });
      expect(first.status).toBe(201);
      const { run } = (await first.json()) as { run: number };
      const retry = await post(base, 'ok', { amount: 100 });
      expect(retry.status).toBe(201);
      expect(retry.headers.get('idempotent-replayed')).toBe('true');
      expect(await retry.json()).toEqual({ run });
      expect(await database.runs(100)).toEqual([run]);
      expect((await database.keyRow('ok'))?.status).toBe('done');
    });

    it('a handler that throws after writing leaves no row and releases the key', async () => {
      const base = await url();
      expect((await post(base, 'throws', { amount: 7, answer: 0 })).status).toBe(500);
      expect(await database.runs(7)).toEqual([]);
      expect(await database.keyRow('throws')).toBeNull();
    });

    it('an answer that is not stored (503) rolls the row back and releases the key', async () => {
      const base = await url();
      const unavailable = await post(base, 'busy', { amount: 8, answer: 503 });
      expect(unavailable.status).toBe(503);
      expect(await database.runs(8)).toEqual([]);
      expect(await database.keyRow('busy')).toBeNull();
    });

    it('a concurrent duplicate gets 409 while the owner works', async () => {
      const base = await url();
      const gate = deferred();
      control.gate = gate.promise;
      const first = post(base, 'dup', { amount: 10 }, true);
      await expect
        .poll(async () => (await database.keyRow('dup'))?.status, { timeout: 10_000 })
        .toBe('pending');
      const duplicate = await post(base, 'dup', { amount: 10 });
      expect(duplicate.status).toBe(409);
      expect(((await duplicate.json()) as { type: string }).type).toMatch(/request-in-progress$/);
      gate.resolve();
      expect((await first).status).toBe(201);
      expect(await database.runs(10)).toHaveLength(1);
    });

    it('a stalled owner taken over after its lease gets 409 superseded: only the new row', async () => {
      const base = await url();
      const gate = deferred();
      control.gate = gate.promise;
      const stalled = post(base, 'slow', { amount: 9 }, true);
      await expect
        .poll(async () => (await database.keyRow('slow'))?.status, { timeout: 10_000 })
        .toBe('pending');
      const first = Number((await database.keyRow('slow'))?.fencingToken);
      control.clock += 31;
      const takeover = await post(base, 'slow', { amount: 9 });
      expect(takeover.status).toBe(201);
      const { run } = (await takeover.json()) as { run: number };
      gate.resolve();
      const late = await stalled;
      expect(late.status).toBe(409);
      expect(((await late.json()) as { type: string }).type).toMatch(/request-superseded$/);
      expect(await database.runs(9)).toEqual([run]);
      const row = await database.keyRow('slow');
      expect(row?.status).toBe('done');
      expect(Number(row?.fencingToken)).toBeGreaterThan(first);
    });
  });
});
