// A Cloudflare Worker with a SQLite-backed Durable Object, bundled by test/durable-sqlite.test.ts
// as wrangler bundles one and run in workerd through Miniflare. The object keeps its idempotency
// keys and its ledger in its own SQLite storage and runs the store, the leases, the migrations,
// the transactional form and the Fetch middleware there, answering what it observed. A Hono
// Worker in front routes each account to its object. The imports name the source so that tsc
// checks this file; the bundler resolves each to the packed package's own subpath.

import { sql } from 'drizzle-orm';
import { drizzle } from 'drizzle-orm/durable-sqlite';
import { Hono } from 'hono';
import * as durableEntry from '../../src/durable-sqlite/index.js';
import {
  type AnyDurableSqliteDatabase,
  applyDurableSqliteMigrations,
  type DurableSqliteHandlerTransaction,
  DurableSqliteIdempotencyStore,
  type DurableSqliteStorageLike,
  durableSqliteSteps,
  durableSqliteTransaction,
  sqliteKeysTable,
} from '../../src/durable-sqlite/index.js';
import { makeIdempotent } from '../../src/function/index.js';
import { fetchTransaction } from '../../src/http/fetch.js';
import type { AcquireResult } from '../../src/index.js';
import { stepsScenario } from './steps-scenario.js';

/** The part of a Durable Object's state this object uses. */
interface ObjectState {
  readonly storage: DurableSqliteStorageLike;
  blockConcurrencyWhile<T>(callback: () => Promise<T>): Promise<T>;
}

interface ObjectStub {
  fetch(request: Request): Promise<Response>;
}

interface Env {
  readonly ACCOUNTS: {
    idFromName(name: string): unknown;
    get(id: unknown): ObjectStub;
  };
}

// The fencing token of an acquired outcome; `undefined` otherwise.
function attemptOf(outcome: AcquireResult<unknown>): number | undefined {
  return outcome.status === 'acquired' ? outcome.fencingToken : undefined;
}

// An acquire's outcome in one word: a takeover is not a fresh `acquired`.
function outcomeOf(outcome: AcquireResult<unknown>): string {
  return outcome.status === 'acquired' && outcome.takenOver ? 'takenOver' : outcome.status;
}

function nameOf(error: unknown): string {
  return error instanceof Error ? `${error.name}: ${error.message}` : String(error);
}

// Several starts of the object at once on a fresh table, then later ones.
async function migrations(db: AnyDurableSqliteDatabase, storage: DurableSqliteStorageLike) {
  const table = sqliteKeysTable('migrated_keys');
  await Promise.all([1, 2, 3].map(() => applyDurableSqliteMigrations(db, { table })));
  await applyDurableSqliteMigrations(db, { table });
  await applyDurableSqliteMigrations(db, { table });
  const journal = storage.sql
    .exec('SELECT hash, created_at FROM __idempotency_migrations_migrated_keys ORDER BY created_at')
    .toArray();
  const columns = storage.sql.exec('PRAGMA table_info("migrated_keys")').toArray();
  const defaultJournal = storage.sql
    .exec('SELECT created_at FROM __idempotency_migrations ORDER BY created_at')
    .toArray();
  storage.sql.exec('CREATE TABLE foreign_keys (id INTEGER PRIMARY KEY, note TEXT)');
  let foreign = 'adopted';
  try {
    await applyDurableSqliteMigrations(db, { table: sqliteKeysTable('foreign_keys') });
  } catch (error) {
    foreign = (error as Error).name;
  }
  return {
    journal,
    defaultJournal,
    columns: columns.map((column) => column.name),
    foreign,
  };
}

// The transactional form: the handler's ledger row and the answer commit together, or neither.
async function transactional(store: DurableSqliteIdempotencyStore, key: string) {
  const runner = durableSqliteTransaction(store);
  const insert = (id: string, amount: number) =>
    sql`INSERT INTO ledger (id, amount) VALUES (${id}, ${amount})`;
  const credit = makeIdempotent(
    (tx, message: { id: string; amount: number }) => {
      tx.run(insert(message.id, message.amount));
      return { credited: message.amount };
    },
    { transaction: runner, key: (message) => message.id },
  );
  const once = await credit({ id: key, amount: 7 });
  const replay = await credit({ id: key, amount: 7 });
  const lease = { expires: 1000, leaseSeconds: 10 };
  // The fence: an owner whose attempt was taken over commits nothing, its ledger row included.
  const stale = `${key}-stale`;
  const owner = await store.acquire(stale, 'd', { ...lease, now: 1 });
  const taker = await store.acquire(stale, 'd', { ...lease, now: 20 });
  const lost = await runner.run(
    { key: stale, fingerprint: 'd', fencingToken: attemptOf(owner) ?? -1 },
    (tx) => {
      tx.run(insert(stale, 1));
      return 'stale';
    },
    (result) => JSON.stringify(result),
  );
  // A handler that throws after its write: nothing commits and the key stays its owner's.
  const failing = `${key}-throws`;
  const claim = await store.acquire(failing, 'd', { ...lease, now: 1 });
  let thrown = 'nothing';
  try {
    await runner.run(
      { key: failing, fingerprint: 'd', fencingToken: attemptOf(claim) ?? -1 },
      (tx) => {
        tx.run(insert(failing, 2));
        throw new Error('the handler failed');
      },
      (result) => JSON.stringify(result),
    );
  } catch (error) {
    thrown = nameOf(error);
  }
  // A handler that returns a promise: refused, and its write before the await rolled back.
  let asynchronous = 'accepted';
  try {
    await runner.run(
      { key: failing, fingerprint: 'd', fencingToken: attemptOf(claim) ?? -1 },
      async (tx) => {
        tx.run(insert(`${failing}-async`, 3));
        return 'async';
      },
      (result) => JSON.stringify(result),
    );
  } catch (error) {
    asynchronous = (error as Error).name;
  }
  const ledger = store.db.$client.sql.exec('SELECT id, amount FROM ledger ORDER BY id').toArray();
  return {
    once,
    replay,
    taker: outcomeOf(taker),
    lost,
    thrown,
    asynchronous,
    ledger: ledger.filter((row) => String(row.id).startsWith(key)),
    staleRow: (await store.get(stale))?.status,
    failingRow: await store.get(failing),
  };
}

/**
 * One account: its idempotency keys and its ledger in the object's own SQLite storage. Every
 * start applies the migrations before any request is delivered.
 */
export class Account {
  readonly #storage: DurableSqliteStorageLike;
  readonly #db: AnyDurableSqliteDatabase;
  readonly #store: DurableSqliteIdempotencyStore;
  readonly #pay: (request: Request) => Promise<Response>;

  constructor(ctx: ObjectState, _env: Env) {
    this.#storage = ctx.storage;
    this.#db = drizzle(ctx.storage);
    const db = this.#db;
    void ctx.blockConcurrencyWhile(async () => {
      await applyDurableSqliteMigrations(db);
      ctx.storage.sql.exec(
        'CREATE TABLE IF NOT EXISTS ledger (id TEXT PRIMARY KEY, amount INTEGER NOT NULL)',
      );
    });
    this.#store = new DurableSqliteIdempotencyStore(db);
    this.#pay = fetchTransaction<DurableSqliteHandlerTransaction, [], { amount: number }>(
      durableSqliteTransaction(this.#store),
      (_request, tx, prepared) => {
        const { amount } = prepared;
        const receipt = crypto.randomUUID();
        tx.run(sql`INSERT INTO ledger (id, amount) VALUES (${receipt}, ${amount})`);
        return { status: 201, headers: { 'x-receipt': receipt }, body: { receipt, amount } };
      },
      { scope: 'global', prepare: async (request) => (await request.json()) as { amount: number } },
    );
  }

  // The step log in the object's storage: step.tx runs in one transactionSync with its record.
  #steps() {
    const db = this.#db;
    const sqlite = this.#storage.sql;
    sqlite.exec('CREATE TABLE IF NOT EXISTS step_ledger (id TEXT NOT NULL)');
    return stepsScenario<DurableSqliteHandlerTransaction>(
      {
        steps: (options, encryption) =>
          durableSqliteSteps(
            new DurableSqliteIdempotencyStore(db, encryption === undefined ? {} : { encryption }),
            options,
          ),
        ledger: (tx, id) => {
          tx.run(sql`INSERT INTO step_ledger (id) VALUES (${id})`);
        },
        ledgerRows: async (id) =>
          Number(
            (
              sqlite.exec('SELECT count(*) AS n FROM step_ledger WHERE id = ?', id).toArray()[0] as
                | { n: number }
                | undefined
            )?.n,
          ),
        stepsColumn: async (key) =>
          (
            sqlite.exec('SELECT steps FROM keys WHERE id = ?', key).toArray()[0] as
              | { steps: string | null }
              | undefined
          )?.steps ?? null,
      },
      'steps',
    );
  }

  async fetch(request: Request): Promise<Response> {
    const url = new URL(request.url);
    const key = url.searchParams.get('key') ?? 'k';
    const store = this.#store;
    try {
      switch (url.pathname) {
        case '/entry':
          return Response.json(Object.keys(durableEntry).sort());
        case '/migrate':
          return Response.json(await migrations(this.#db, this.#storage));
        case '/acquire':
          return Response.json(
            outcomeOf(await store.acquire(key, 'd', { expires: 1000, now: 1, leaseSeconds: 30 })),
          );
        case '/transaction':
          return Response.json(await transactional(store, key));
        case '/steps':
          return Response.json(await this.#steps());
        case '/pay':
          return this.#pay(request);
        case '/ledger':
          return Response.json(this.#storage.sql.exec('SELECT amount FROM ledger').toArray());
        default:
          return new Response('not found', { status: 404 });
      }
    } catch (error) {
      return new Response(nameOf(error), { status: 500 });
    }
  }
}

function account(env: Env, name: string): ObjectStub {
  return env.ACCOUNTS.get(env.ACCOUNTS.idFromName(name));
}

// The Worker in front: each account's requests go to its own object, which alone holds its keys.
const app = new Hono<{ Bindings: Env }>();
app.post('/accounts/:account/pay', (c) =>
  account(c.env, c.req.param('account')).fetch(new Request('https://account/pay', c.req.raw)),
);
app.get('/accounts/:account/ledger', (c) =>
  account(c.env, c.req.param('account')).fetch(new Request('https://account/ledger')),
);
// Ten requests at once to one object, each acquiring the same key.
app.get('/race/:account', async (c) => {
  const key = c.req.query('key') ?? 'race';
  const stub = account(c.env, c.req.param('account'));
  const outcomes = await Promise.all(
    Array.from({ length: 10 }, async () => {
      const response = await stub.fetch(new Request(`https://account/acquire?key=${key}`));
      return response.json();
    }),
  );
  return c.json(outcomes);
});
// Any scenario of the object: /objects/<name>/<scenario>?key=…
app.get('/objects/:object/:scenario', (c) => {
  const url = new URL(c.req.url);
  return account(c.env, c.req.param('object')).fetch(
    new Request(`https://account/${c.req.param('scenario')}${url.search}`),
  );
});

// biome-ignore lint/style/noDefaultExport: workerd runs a module Worker's default export
export default app;
