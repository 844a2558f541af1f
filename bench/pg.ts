import { and, eq, gt, is, Param, Placeholder, sql } from 'drizzle-orm';
import { drizzle } from 'drizzle-orm/node-postgres';
import pg from 'pg';
import { KeyStatus } from '../src/core/status.js';
import { openPgStore, pgKeysTable } from '../src/pg/index.js';
import { alternate, median, medianRatio, nowMs } from './support/measure.js';
import type { BenchSize, GroupResult } from './support/report.js';

const URL = 'postgres://postgres@127.0.0.1:5432/test';
const CONNECTIONS = 8;
const p = sql.placeholder;

// A raw statement with exactly the text drizzle sends for the store's query, its parameters
// filled in by name in the same order.
function rawStatement(name: string, query: { toSQL(): { sql: string; params: unknown[] } }) {
  const { sql: text, params } = query.toSQL();
  const slots = params.map((param): { name: string } | { value: unknown } => {
    const inner = is(param, Param) ? param.value : param;
    return is(inner, Placeholder) ? { name: inner.name } : { value: inner };
  });
  return (values: Record<string, unknown>) => ({
    name,
    text,
    values: slots.map((slot) => ('name' in slot ? values[slot.name] : slot.value)),
  });
}

async function opsPerSecondConcurrent(count: number, op: (index: number) => Promise<unknown>) {
  let next = 0;
  const worker = async () => {
    while (next < count) await op(next++);
  };
  const start = nowMs();
  await Promise.all(Array.from({ length: CONNECTIONS }, worker));
  return count / ((nowMs() - start) / 1000);
}

/**
 * reserve, finish and fetch of the PostgreSQL store against node-postgres sending the same SQL
 * text as named prepared statements, both on one pool of 8 connections to the real server with 8
 * operations in flight, alternating.
 */
export async function pgOps({ quick }: BenchSize): Promise<GroupResult> {
  const count = 400;
  const rounds = quick ? 11 : 31;
  const schema = `bench_${process.pid}`;
  const pool = new pg.Pool({ connectionString: URL, max: CONNECTIONS });
  const store = await openPgStore<{ receipt: number }>(pool, { schema });
  const keys = pgKeysTable(schema);
  const db = drizzle(pool);
  const raw = {
    reserve: rawStatement(
      'bench_raw_reserve',
      db
        .insert(keys)
        .values({
          id: p('id'),
          fingerprint: p('fingerprint'),
          status: KeyStatus.pending,
          expires: p('expires'),
        })
        .onConflictDoNothing()
        .returning({ id: keys.id }),
    ),
    finish: rawStatement(
      'bench_raw_finish',
      db
        .update(keys)
        .set({ status: KeyStatus.done, response: sql<string>`${p('response')}` })
        .where(
          and(
            eq(keys.id, p('id')),
            eq(keys.fingerprint, p('fingerprint')),
            eq(keys.status, KeyStatus.pending),
          ),
        )
        .returning({ id: keys.id }),
    ),
    fetch: rawStatement(
      'bench_raw_fetch',
      db
        .select({ response: keys.response })
        .from(keys)
        .where(
          and(eq(keys.id, p('id')), eq(keys.status, KeyStatus.done), gt(keys.expires, p('now'))),
        ),
    ),
  };
  const key = (side: string, round: number, index: number) => `${side}-${round}-${index}`;
  try {
    const reserve = await alternate(
      rounds,
      (r) => opsPerSecondConcurrent(count, (i) => store.reserve(key('o', r, i), 'd', 1e9)),
      (r) =>
        opsPerSecondConcurrent(count, async (i) => {
          const result = await pool.query(
            raw.reserve({ id: key('r', r, i), fingerprint: 'd', expires: 1e9 }),
          );
          return result.rows.length === 1;
        }),
    );
    const finish = await alternate(
      rounds,
      (r) =>
        opsPerSecondConcurrent(count, (i) => store.finish(key('o', r, i), 'd', { receipt: i })),
      (r) =>
        opsPerSecondConcurrent(count, async (i) => {
          const result = await pool.query(
            raw.finish({
              id: key('r', r, i),
              fingerprint: 'd',
              response: JSON.stringify({ receipt: i }),
            }),
          );
          return result.rows.length === 1;
        }),
    );
    const fetch = await alternate(
      rounds,
      (r) => opsPerSecondConcurrent(count, (i) => store.fetch(key('o', r, i), 5)),
      (r) =>
        opsPerSecondConcurrent(count, async (i) => {
          const result = await pool.query(raw.fetch({ id: key('r', r, i), now: 5 }));
          const text = (result.rows[0] as { response: string | null } | undefined)?.response;
          return text == null ? null : JSON.parse(text);
        }),
    );
    const ratio = medianRatio;
    return {
      metrics: {
        'pg.reserve.ratio': ratio(reserve),
        'pg.finish.ratio': ratio(finish),
        'pg.fetch.ratio': ratio(fetch),
      },
      details: {
        'pg.reserve.opsPerSec.store': median(reserve.ours),
        'pg.reserve.opsPerSec.raw': median(reserve.theirs),
        'pg.finish.opsPerSec.store': median(finish.ours),
        'pg.finish.opsPerSec.raw': median(finish.theirs),
        'pg.fetch.opsPerSec.store': median(fetch.ours),
        'pg.fetch.opsPerSec.raw': median(fetch.theirs),
      },
    };
  } finally {
    await store.close();
    await pool.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
    await pool.end();
  }
}
