// A Worker over a D1 binding, bundled by bench/d1.ts and run in workerd through Miniflare. Each
// request runs one timed block of the D1 store's operations, or of the same statements sent raw
// through the binding, and answers its operations per second: the clock runs inside the Worker,
// so the Miniflare request that carries the block to it is not timed.

import { and, eq, gt, sql } from 'drizzle-orm';
import { drizzle } from 'drizzle-orm/d1';
import { ownerRow } from '../src/core/key-conditions.js';
import { KeyStatus } from '../src/core/status.js';
import {
  applyD1Migrations,
  type D1DatabaseLike,
  D1IdempotencyStore,
  keys,
} from '../src/d1/index.js';
import { answerOfSize, type JsonObject, type RealisticKey } from './support/inputs.js';
import { check } from './support/measure.js';
import { opsPerSecondConcurrent, rawSql } from './support/server-ops.js';

interface Env {
  readonly DB: D1DatabaseLike;
}

/** What bench/d1.ts sends for one block: the side, the operation, and the keys it runs on. */
export interface D1Block {
  readonly side: 'store' | 'raw';
  readonly op: 'reserve' | 'finish' | 'fetch';
  readonly keys: readonly RealisticKey[];
}

const p = sql.placeholder;

// The SQL text the store sends for each operation, built from the same conditions, and its
// parameters in order by name.
function rawStatements(db: ReturnType<typeof drizzle>) {
  return {
    reserve: rawSql(
      db
        .insert(keys)
        .values({
          id: p('id'),
          fingerprint: p('fingerprint'),
          status: KeyStatus.pending,
          expires: p('expires'),
        })
        .onConflictDoNothing(),
    ),
    finish: rawSql(
      db
        .update(keys)
        .set({ status: KeyStatus.done, response: sql<string>`${p('response')}` })
        .where(ownerRow(keys, p('id'), p('fingerprint'))),
    ),
    fetch: rawSql(
      db
        .select({ response: keys.response })
        .from(keys)
        .where(
          and(eq(keys.id, p('id')), eq(keys.status, KeyStatus.done), gt(keys.expires, p('now'))),
        ),
    ),
  };
}

// Made once per isolate, outside every timed block; the same answers as the server groups'.
let answers: JsonObject[] = [];
function answersFor(count: number): JsonObject[] {
  if (answers.length < count)
    answers = Array.from({ length: count }, (_, i) => answerOfSize(1024, i));
  return answers;
}

function storeBlock(env: Env, block: D1Block): () => Promise<number> {
  const store = new D1IdempotencyStore<JsonObject>(drizzle(env.DB));
  const input = (i: number) => block.keys[i] as RealisticKey;
  const answer = answersFor(block.keys.length);
  const count = block.keys.length;
  switch (block.op) {
    case 'reserve':
      return () =>
        opsPerSecondConcurrent(count, async (i) => {
          check(await store.reserve(input(i).key, input(i).fingerprint, 1e9), 'reserve');
        });
    case 'finish':
      return () =>
        opsPerSecondConcurrent(count, async (i) => {
          check(
            await store.finish(input(i).key, input(i).fingerprint, answer[i] as JsonObject),
            'finish',
          );
        });
    case 'fetch':
      return () =>
        opsPerSecondConcurrent(count, async (i) => {
          check((await store.fetch(input(i).key, 5)) !== null, 'fetch');
        });
  }
}

// A careful user's raw side: the statement prepared once, bound per call, `JSON.stringify` before
// writing and `JSON.parse` after reading.
function rawBlock(env: Env, block: D1Block): () => Promise<number> {
  const raw = rawStatements(drizzle(env.DB));
  const statement = env.DB.prepare(raw[block.op].text);
  const values = raw[block.op].values;
  const input = (i: number) => block.keys[i] as RealisticKey;
  const answer = answersFor(block.keys.length);
  const count = block.keys.length;
  const changes = async (named: Record<string, unknown>) =>
    (await statement.bind(...values(named)).run()).meta.changes;
  switch (block.op) {
    case 'reserve':
      return () =>
        opsPerSecondConcurrent(count, async (i) => {
          const { key, fingerprint } = input(i);
          check(
            (await changes({ id: key, fingerprint: fingerprint, expires: 1e9 })) === 1,
            'raw reserve',
          );
        });
    case 'finish':
      return () =>
        opsPerSecondConcurrent(count, async (i) => {
          const { key, fingerprint } = input(i);
          const response = JSON.stringify(answer[i]);
          check(
            (await changes({ id: key, fingerprint: fingerprint, response })) === 1,
            'raw finish',
          );
        });
    case 'fetch':
      return () =>
        opsPerSecondConcurrent(count, async (i) => {
          const { results } = await statement.bind(...values({ id: input(i).key, now: 5 })).all();
          const text = (results?.[0] as { response: string | null } | undefined)?.response;
          check(text != null && JSON.parse(text) !== null, 'raw fetch');
        });
  }
}

/** The Worker: `POST /migrate` creates the table, `POST /block` runs and times one block. */
// biome-ignore lint/style/noDefaultExport: workerd runs a module Worker's default export
export default {
  async fetch(request: Request, env: Env): Promise<Response> {
    const { pathname } = new URL(request.url);
    try {
      if (pathname === '/migrate') {
        await applyD1Migrations(drizzle(env.DB));
        return Response.json({ ok: true });
      }
      if (pathname === '/block') {
        const block = (await request.json()) as D1Block;
        const run = block.side === 'store' ? storeBlock(env, block) : rawBlock(env, block);
        return Response.json({ opsPerSec: await run() });
      }
      return new Response('not found', { status: 404 });
    } catch (error) {
      return new Response(error instanceof Error ? (error.stack ?? error.message) : String(error), {
        status: 500,
      });
    }
  },
};
