import { and, eq, gt, is, Param, Placeholder, sql } from 'drizzle-orm';
import { drizzle } from 'drizzle-orm/mysql2';
import mysql from 'mysql2/promise';
import { KeyStatus } from '../src/core/status.js';
import { ER_DUP_ENTRY, mysqlErrno, mysqlKeysTable, openMysqlStore } from '../src/mysql/index.js';
import { alternate, median, medianRatio, nowMs } from './support/measure.js';
import type { BenchSize, GroupResult } from './support/report.js';

const URL = process.env.MYSQL_URL || 'mysql://root@127.0.0.1:3306/test';
const CONNECTIONS = 8;
const p = sql.placeholder;

// A raw statement with exactly the text drizzle sends for the store's query, its parameters
// filled in by name in the same order.
function rawStatement(query: { toSQL(): { sql: string; params: unknown[] } }) {
  const { sql: text, params } = query.toSQL();
  const slots = params.map((param): { name: string } | { value: unknown } => {
    const inner = is(param, Param) ? param.value : param;
    return is(inner, Placeholder) ? { name: inner.name } : { value: inner };
  });
  return (values: Record<string, unknown>): [string, unknown[]] => [
    text,
    slots.map((slot) => ('name' in slot ? values[slot.name] : slot.value)),
  ];
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

interface Affected {
  affectedRows: number;
}

/**
 * reserve, finish and fetch of the MySQL store against mysql2 sending the same SQL text, both on
 * one pool of 8 connections to the real server (MYSQL_URL, default the local MariaDB) with 8
 * operations in flight, alternating. The database `bench_<pid>` is made and dropped here.
 */
export async function mysqlOps({ quick }: BenchSize): Promise<GroupResult> {
  const count = 400;
  const rounds = quick ? 11 : 31;
  const name = `bench_${process.pid}`;
  const admin = await mysql.createConnection(URL);
  await admin.query(`CREATE DATABASE \`${name}\``);
  const target = new globalThis.URL(URL);
  target.pathname = `/${name}`;
  const pool = mysql.createPool({ uri: target.toString(), connectionLimit: CONNECTIONS });
  const store = await openMysqlStore<{ receipt: number }>(pool);
  const keys = mysqlKeysTable();
  const db = drizzle(pool);
  const raw = {
    reserve: rawStatement(
      db.insert(keys).values({
        id: sql`${p('id')}`,
        fingerprint: sql`${p('fingerprint')}`,
        status: KeyStatus.pending,
        expires: sql`${p('expires')}`,
      }),
    ),
    finish: rawStatement(
      db
        .update(keys)
        .set({ status: KeyStatus.done, response: sql`${p('response')}` })
        .where(
          and(
            eq(keys.id, p('id')),
            eq(keys.fingerprint, p('fingerprint')),
            eq(keys.status, KeyStatus.pending),
          ),
        ),
    ),
    fetch: rawStatement(
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
          try {
            await pool.query(
              ...raw.reserve({ id: key('r', r, i), fingerprint: 'd', expires: 1e9 }),
            );
            return true;
          } catch (error) {
            if (mysqlErrno(error) === ER_DUP_ENTRY) return false;
            throw error;
          }
        }),
    );
    const finish = await alternate(
      rounds,
      (r) =>
        opsPerSecondConcurrent(count, (i) => store.finish(key('o', r, i), 'd', { receipt: i })),
      (r) =>
        opsPerSecondConcurrent(count, async (i) => {
          const [result] = (await pool.query(
            ...raw.finish({
              id: key('r', r, i),
              fingerprint: 'd',
              response: JSON.stringify({ receipt: i }),
            }),
          )) as unknown as [Affected];
          return result.affectedRows === 1;
        }),
    );
    const fetch = await alternate(
      rounds,
      (r) => opsPerSecondConcurrent(count, (i) => store.fetch(key('o', r, i), 5)),
      (r) =>
        opsPerSecondConcurrent(count, async (i) => {
          const [rows] = (await pool.query(
            ...raw.fetch({ id: key('r', r, i), now: 5 }),
          )) as unknown as [{ response: string | null }[]];
          const text = rows[0]?.response;
          return text == null ? null : JSON.parse(text);
        }),
    );
    return {
      metrics: {
        'mysql.reserve.ratio': medianRatio(reserve),
        'mysql.finish.ratio': medianRatio(finish),
        'mysql.fetch.ratio': medianRatio(fetch),
      },
      details: {
        'mysql.reserve.opsPerSec.store': median(reserve.ours),
        'mysql.reserve.opsPerSec.raw': median(reserve.theirs),
        'mysql.finish.opsPerSec.store': median(finish.ours),
        'mysql.finish.opsPerSec.raw': median(finish.theirs),
        'mysql.fetch.opsPerSec.store': median(fetch.ours),
        'mysql.fetch.opsPerSec.raw': median(fetch.theirs),
      },
    };
  } finally {
    await store.close();
    await pool.end();
    await admin.query(`DROP DATABASE IF EXISTS \`${name}\``);
    await admin.end();
  }
}
