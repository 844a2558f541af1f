// A Cloudflare Worker over a D1 binding, bundled by test/runtimes/workerd.test.ts as wrangler bundles one
// and run in workerd through Miniflare. It imports every runtime-neutral entry (a throw at load
// would stop the Worker from starting), and runs the store, the leases, the transactional form and
// the Hono and Fetch middleware on D1, answering what it observed. The imports name the source so
// that tsc checks this file; the bundler resolves each to the packed package's own subpath.

import { sql } from 'drizzle-orm';
import { drizzle } from 'drizzle-orm/d1';
import { Hono } from 'hono';
import * as d1Entry from '../../src/d1/index.js';
import {
  applyD1Migrations,
  type D1HandlerBatch,
  D1IdempotencyStore,
  d1Steps,
  d1Transaction,
  sqliteKeysTable,
} from '../../src/d1/index.js';
import * as functionEntry from '../../src/function/index.js';
import { makeIdempotent } from '../../src/function/index.js';
import * as fetchEntry from '../../src/http/fetch.js';
import { fetchIdempotency } from '../../src/http/fetch.js';
import * as honoEntry from '../../src/http/hono.js';
import { honoIdempotency } from '../../src/http/hono.js';
import * as httpEntry from '../../src/http/index.js';
import * as root from '../../src/index.js';
import * as libsqlEntry from '../../src/libsql/index.js';
import * as mysqlEntry from '../../src/mysql/index.js';
import * as observeEntry from '../../src/observe/index.js';
import * as pgEntry from '../../src/pg/index.js';
import { stepsScenario } from './steps-scenario.js';

interface Env {
  // biome-ignore lint/suspicious/noExplicitAny: the binding's type comes from workers-types, not installed here
  DB: any;
}

const ENTRIES: Record<string, Record<string, unknown>> = {
  '.': root,
  './http': httpEntry,
  './hono': honoEntry,
  './fetch': fetchEntry,
  './function': functionEntry,
  './observe': observeEntry,
  './pg': pgEntry,
  './mysql': mysqlEntry,
  './libsql': libsqlEntry,
  './d1': d1Entry,
};

// Three isolates starting at once on a fresh table, then the same Worker's later cold starts.
async function migrations(env: Env) {
  const db = drizzle(env.DB);
  const table = sqliteKeysTable('migrated_keys');
  await Promise.all([1, 2, 3].map(() => applyD1Migrations(db, { table })));
  await applyD1Migrations(db, { table });
  await applyD1Migrations(db, { table });
  const { results: journal } = await env.DB.prepare(
    'SELECT hash, created_at FROM __idempotency_migrations_migrated_keys ORDER BY created_at',
  ).all();
  const { results: columns } = await env.DB.prepare('PRAGMA table_info("migrated_keys")').all();
  return {
    journal,
    columns: (columns as { name: string }[]).map((column) => column.name),
  };
}

// Ten isolates' worth of stores, each built per "request", acquiring one key at once.
async function race(env: Env, key: string) {
  await applyD1Migrations(drizzle(env.DB));
  const outcomes = await Promise.all(
    Array.from({ length: 10 }, () =>
      new D1IdempotencyStore(drizzle(env.DB)).acquire(key, 'd', {
        expires: 1000,
        now: 1,
        leaseSeconds: 30,
      }),
    ),
  );
  return outcomes.map((outcome) =>
    outcome.status === 'acquired' && !outcome.takenOver ? 'acquired' : outcome.status,
  );
}

// The operator's and the heartbeat's side of leases, and a foreign table refused, on a table of
// its own.
async function leases(env: Env) {
  const db = drizzle(env.DB);
  const table = sqliteKeysTable('lease_keys');
  await applyD1Migrations(db, { table });
  const store = new D1IdempotencyStore(db, { table });
  const lease = { expires: 1000, leaseSeconds: 10 };
  const seen: Record<string, unknown> = {};
  const claim = await store.acquire('l', 'd', { ...lease, now: 1 });
  const token = claim.status === 'acquired' ? claim.fencingToken : 0;
  seen.acquired = claim.status;
  seen.renew = await store.renew('l', 'd', token, 50);
  seen.renewWrongAttempt = await store.renew('l', 'd', token + 1, 60);
  seen.beforeLapse = (await store.acquire('l', 'd', { ...lease, now: 40 })).status;
  seen.markUnrecorded = await store.markUnrecorded('l', 'd', token);
  seen.stale = (await store.pendingKeys({ now: 40, stale: true })).map((row) => row.key);
  seen.stats = await store.stats(40);
  seen.releasePending = await store.releasePending('l');
  seen.releaseAgain = await store.releasePending('l');
  await env.DB.prepare('CREATE TABLE foreign_keys (id INTEGER PRIMARY KEY, note TEXT)').run();
  try {
    await applyD1Migrations(db, { table: sqliteKeysTable('foreign_keys') });
    seen.foreign = 'adopted';
  } catch (error) {
    seen.foreign = (error as Error).name;
  }
  return seen;
}

async function transactional(env: Env, key: string) {
  const db = drizzle(env.DB);
  await applyD1Migrations(db);
  await env.DB.prepare(
    'CREATE TABLE IF NOT EXISTS ledger (id TEXT PRIMARY KEY, amount INTEGER NOT NULL)',
  ).run();
  const store = new D1IdempotencyStore(db);
  const runner = d1Transaction(store);
  const credit = makeIdempotent(
    async (tx, message: { id: string; amount: number }) => {
      tx.add(
        tx.db.run(sql`INSERT INTO ledger (id, amount) VALUES (${message.id}, ${message.amount})`),
      );
      return { credited: message.amount };
    },
    { transaction: runner, key: (message) => message.id },
  );
  const once = await credit({ id: key, amount: 7 });
  const replay = await credit({ id: key, amount: 7 });
  // The fence: an owner whose attempt was taken over commits nothing, the ledger row included.
  const stale = `${key}-stale`;
  const owner = await store.acquire(stale, 'd', { expires: 1000, now: 1, leaseSeconds: 10 });
  const taker = await store.acquire(stale, 'd', { expires: 1000, now: 20, leaseSeconds: 10 });
  const lost = await runner.run(
    {
      key: stale,
      fingerprint: 'd',
      fencingToken: owner.status === 'acquired' ? owner.fencingToken : -1,
    },
    (tx) => {
      tx.add(tx.db.run(sql`INSERT INTO ledger (id, amount) VALUES (${stale}, 1)`));
      return 'stale';
    },
    (result) => JSON.stringify(result),
  );
  // A batch that D1 commits but whose answer is lost on its way back (the connection failed after
  // the commit): the binding runs it, then throws as a failed network would. The runner decides
  // from the row, which is done under the call's token: the call succeeded.
  let dropNextAnswer = false;
  const dropping = new Proxy(env.DB, {
    get(target, name) {
      const value = Reflect.get(target, name);
      if (name !== 'batch') return typeof value === 'function' ? value.bind(target) : value;
      return async (statements: unknown[]) => {
        const answer = await target.batch(statements);
        if (!dropNextAnswer) return answer;
        dropNextAnswer = false;
        throw new Error('Network connection lost.');
      };
    },
  });
  const droppingStore = new D1IdempotencyStore(drizzle(dropping));
  let lostAnswerRuns = 0;
  const creditLosingAnswer = makeIdempotent(
    async (tx, message: { id: string; amount: number }) => {
      lostAnswerRuns += 1;
      // Armed here, after the claim's own batch: only the batch that records the answer loses it.
      dropNextAnswer = true;
      tx.add(
        tx.db.run(sql`INSERT INTO ledger (id, amount) VALUES (${message.id}, ${message.amount})`),
      );
      return { credited: message.amount };
    },
    { transaction: d1Transaction(droppingStore), key: (message) => message.id },
  );
  const lostAnswer = `${key}-lost-answer`;
  const answerLost = await creditLosingAnswer({ id: lostAnswer, amount: 3 }).catch(
    (error: Error) => error.name,
  );
  const answerLostReplay = await creditLosingAnswer({ id: lostAnswer, amount: 3 });
  const { results } = await env.DB.prepare('SELECT id, amount FROM ledger ORDER BY id').all();
  return {
    once,
    replay,
    taker: taker.status,
    lost,
    ledger: results,
    staleRow: (await store.get(stale))?.status,
    answerLost,
    answerLostReplay,
    lostAnswerRuns,
  };
}

// The step log on D1: step.tx queues its writes in the batch that records the step.
async function steps(env: Env) {
  const db = drizzle(env.DB);
  await applyD1Migrations(db);
  await env.DB.prepare('CREATE TABLE IF NOT EXISTS step_ledger (id TEXT NOT NULL)').run();
  return stepsScenario<D1HandlerBatch>(
    {
      steps: (options, encryption) =>
        d1Steps(
          new D1IdempotencyStore(db, encryption === undefined ? {} : { encryption }),
          options,
        ),
      ledger: (batch, id) =>
        batch.add(batch.db.run(sql`INSERT INTO step_ledger (id) VALUES (${id})`)),
      ledgerRows: async (id) => {
        const row = await env.DB.prepare('SELECT count(*) AS n FROM step_ledger WHERE id = ?')
          .bind(id)
          .first();
        return Number(row?.n);
      },
      stepsColumn: async (key) => {
        const row = await env.DB.prepare('SELECT steps FROM keys WHERE id = ?').bind(key).first();
        return (row?.steps as string | null | undefined) ?? null;
      },
    },
    'steps',
  );
}

const app = new Hono<{ Bindings: Env }>();
app.post(
  '/hono/pay',
  async (c, next) => {
    const db = drizzle(c.env.DB);
    await applyD1Migrations(db);
    return honoIdempotency(new D1IdempotencyStore(db), { scope: 'global' })(c, next);
  },
  async (c) => {
    const body = await c.req.json<{ amount: number }>();
    const receipt = crypto.randomUUID();
    return c.json({ receipt, amount: body.amount }, 201, { 'x-receipt': receipt });
  },
);

// biome-ignore lint/style/noDefaultExport: workerd runs a module Worker's default export
export default {
  async fetch(request: Request, env: Env): Promise<Response> {
    const url = new URL(request.url);
    const key = url.searchParams.get('key') ?? 'k';
    switch (url.pathname) {
      case '/entries':
        return Response.json(
          Object.fromEntries(
            Object.entries(ENTRIES).map(([name, entry]) => [name, Object.keys(entry).length]),
          ),
        );
      case '/migrate':
        return Response.json(await migrations(env));
      case '/race':
        return Response.json(await race(env, key));
      case '/leases':
        return Response.json(await leases(env));
      case '/transaction':
        return Response.json(await transactional(env, key));
      case '/steps':
        return Response.json(await steps(env));
      case '/fetch/pay': {
        const db = drizzle(env.DB);
        await applyD1Migrations(db);
        const handler = fetchIdempotency(new D1IdempotencyStore(db), { scope: 'global' })(
          async (req: Request) => {
            const body = (await req.json()) as { amount: number };
            return Response.json(
              { receipt: crypto.randomUUID(), amount: body.amount },
              { status: 201 },
            );
          },
        );
        return handler(request);
      }
      default:
        return app.fetch(request, env);
    }
  },
};
