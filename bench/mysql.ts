import { and, eq, gt, sql } from 'drizzle-orm';
import { drizzle } from 'drizzle-orm/mysql2';
import mysql from 'mysql2/promise';
import { ownerRow } from '../src/core/key-conditions.js';
import { KeyStatus } from '../src/core/status.js';
import { ER_DUP_ENTRY, mysqlErrno } from '../src/mysql/errors.js';
import type { JsonObject } from './support/inputs.js';
import { check, median, pairedRatio } from './support/measure.js';
import type { BenchSize, GroupResult } from './support/report.js';
import { compareServerOperations, IN_FLIGHT, rawSql } from './support/server-ops.js';
import { shippedMysql } from './support/shipped.js';

const { mysqlKeysTable, openMysqlStore } = shippedMysql;

const URL = process.env.MYSQL_URL || 'mysql://root@127.0.0.1:3306/test';
const p = sql.placeholder;

// A statement with exactly the text drizzle sends for the store's query, as mysql2's arguments.
function rawStatement(query: Parameters<typeof rawSql>[0]) {
  const { text, values } = rawSql(query);
  return (named: Record<string, unknown>): [string, unknown[]] => [text, values(named)];
}

interface Affected {
  affectedRows: number;
}

/**
 * reserve, finish and fetch of the MySQL store against mysql2 sending the same SQL text, both on
 * one pool of 8 connections to the real server (MYSQL_URL, default the local MariaDB) with 8
 * operations in flight, alternating, on UUID keys, 64-hex digests and 1 KB answers, every write
 * checked on both sides. The database `bench_<pid>` is made and dropped here.
 */
export async function mysqlOps({ quick }: BenchSize): Promise<GroupResult> {
  const count = 2_000;
  const rounds = quick ? 9 : 25;
  const name = `bench_${process.pid}`;
  const admin = await mysql.createConnection(URL);
  await admin.query(`CREATE DATABASE \`${name}\``);
  const target = new globalThis.URL(URL);
  target.pathname = `/${name}`;
  const pool = mysql.createPool({ uri: target.toString(), connectionLimit: IN_FLIGHT });
  const store = await openMysqlStore<JsonObject>(pool);
  const keys = mysqlKeysTable();
  const db = drizzle({ client: pool });
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
        .where(ownerRow(keys, p('id'), p('fingerprint'))),
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
  try {
    const changed = async (statement: [string, unknown[]]) =>
      ((await pool.query(...statement)) as unknown as [Affected])[0].affectedRows;
    const { reserve, finish, fetch } = await compareServerOperations(
      store,
      {
        reserve: async (key, fingerprint) => {
          try {
            return await changed(raw.reserve({ id: key, fingerprint: fingerprint, expires: 1e9 }));
          } catch (error) {
            if (mysqlErrno(error) === ER_DUP_ENTRY) check(false, 'raw reserve of a new key');
            throw error;
          }
        },
        finish: (key, fingerprint, response) =>
          changed(raw.finish({ id: key, fingerprint: fingerprint, response })),
        fetch: async (key, now) => {
          const [rows] = (await pool.query(...raw.fetch({ id: key, now }))) as unknown as [
            { response: string | null }[],
          ];
          return rows[0]?.response;
        },
      },
      rounds,
      count,
    );
    return {
      metrics: {
        'mysql.reserve.ratio': pairedRatio(reserve),
        'mysql.finish.ratio': pairedRatio(finish),
        'mysql.fetch.ratio': pairedRatio(fetch),
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
