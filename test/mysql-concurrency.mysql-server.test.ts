import { drizzle } from 'drizzle-orm/mysql2';
import mysql from 'mysql2/promise';
import { afterEach, describe, expect, it } from 'vitest';
import { applyMysqlMigrations, MysqlIdempotencyStore } from '../src/mysql/index.js';
import type { RawRow } from './contract/harness.js';
import {
  freshMysqlDatabase,
  type MysqlDatabase,
  mysqlUrl,
  readMysqlRows,
  seedMysqlRows,
} from './support/mysql.js';

// Collected only when MYSQL_URL is set (see vitest.config.ts); then an unreachable server fails.
const url = mysqlUrl() as string;

let target: MysqlDatabase;
const pools: mysql.Pool[] = [];
afterEach(async () => {
  await Promise.all(pools.splice(0).map((pool) => pool.end()));
  await target.drop();
});

/** `count` stores, each on its own single connection, already connected. */
async function stores(count: number): Promise<MysqlIdempotencyStore[]> {
  return Promise.all(
    Array.from({ length: count }, async () => {
      const pool = mysql.createPool({ uri: target.url, connectionLimit: 1 });
      pools.push(pool);
      await pool.query('SELECT 1');
      return new MysqlIdempotencyStore(drizzle(pool));
    }),
  );
}

async function migratedDatabase(): Promise<MysqlDatabase> {
  const database = await freshMysqlDatabase(url, 2);
  await applyMysqlMigrations(database.db);
  return database;
}

const pad = (i: number) => String(i).padStart(4, '0');

describe('MySQL under real concurrency', () => {
  it('16 connections reserving the same 300 keys: exactly one true per key', async () => {
    target = await migratedDatabase();
    const connections = await stores(16);
    const keys = Array.from({ length: 300 }, (_, i) => `key-${pad(i)}`);
    const results = await Promise.all(
      connections.map(async (store, c) => {
        const won: boolean[] = [];
        for (const key of keys) won.push(await store.reserve(key, `conn-${c}`, 100));
        return won;
      }),
    );
    const rows = await readMysqlRows(target.db);
    expect(rows).toHaveLength(300);
    for (const [k, row] of rows.entries()) {
      const winners = results.flatMap((won, c) => (won[k] ? [c] : []));
      expect(winners).toHaveLength(1);
      expect(row).toEqual({
        id: keys[k],
        fingerprint: `conn-${winners[0]}`,
        status: 'pending',
        response: null,
        expires: 100,
      });
    }
  });

  it('4 purgers with writers re-reserving purged keys: disjoint, complete, no pending row lost', async () => {
    target = await migratedDatabase();
    const now = 10;
    const expired = Array.from({ length: 3000 }, (_, i) => `e-${pad(i)}`);
    const stalePending = Array.from({ length: 200 }, (_, i) => `p-${pad(i)}`);
    const live = Array.from({ length: 200 }, (_, i) => `l-${pad(i)}`);
    const row = (id: string, status: string, expires: number): RawRow => ({
      id,
      fingerprint: 'v1',
      status,
      response: status === 'done' ? '{"v":1}' : null,
      expires,
    });
    await seedMysqlRows(target.db, [
      ...expired.map((id, i) => row(id, 'done', (i % 10) + 1)),
      ...stalePending.map((id) => row(id, 'pending', 0)),
      ...live.map((id) => row(id, 'done', 1e9)),
    ]);

    const [purgers, writers] = [await stores(4), await stores(4)];
    const purgedSoFar: string[] = [];
    let purging = true;

    // Two purge in id order and report their ids; two sweep in index order and report counts.
    let swept = 0;
    const purged = Promise.all(
      purgers.map(async (store, i) => {
        const mine: string[] = [];
        for (;;) {
          if (i >= 2) {
            const count = await store.sweepBatch(now, 100);
            if (count === 0) return mine;
            swept += count;
            continue;
          }
          const batch = await store.purge(now, 100);
          if (batch.length === 0) return mine;
          mine.push(...batch);
          purgedSoFar.push(...batch);
        }
      }),
    ).finally(() => {
      purging = false;
    });

    // Writers race the purgers: they re-reserve keys just purged (and keys not purged yet, which
    // must be refused), finish half of what they win with a live deadline, and keep adding new
    // pending rows that are already past their deadline.
    const written = Promise.all(
      writers.map(async (store, w) => {
        const won: string[] = [];
        const created: string[] = [];
        for (let i = 0; purging || i < 50; i++) {
          const recent = purgedSoFar.slice(-20);
          const key =
            i % 3 === 0 || recent.length === 0
              ? expired[Math.floor(Math.random() * expired.length)]
              : recent[Math.floor(Math.random() * recent.length)];
          if (key !== undefined && (await store.reserve(key, `w${w}`, 1e9))) {
            won.push(key);
            if (won.length % 2 === 0) expect(await store.finish(key, `w${w}`, { w })).toBe(true);
          }
          const fresh = `n-${w}-${pad(i)}`;
          expect(await store.reserve(fresh, `w${w}`, now - 1)).toBe(true);
          created.push(fresh);
        }
        return { won, created };
      }),
    );

    const [byPurger, byWriter] = await Promise.all([purged, written]);
    const all = byPurger.flat();
    expect(new Set(all).size).toBe(all.length);
    for (const id of all) expect(id).toMatch(/^e-/);
    // Every expired row deleted exactly once, by one purger or one sweeper. How they split the
    // rows depends on timing and on the plan MySQL picks (a purger or sweeper that finds every
    // remaining row locked by another stops early), so only the sum is fixed.
    expect(all.length + swept).toBe(expired.length);

    const won = byWriter.flatMap((w) => w.won);
    const created = byWriter.flatMap((w) => w.created);
    expect(new Set(won).size).toBe(won.length);
    expect(won.length).toBeGreaterThan(0);
    const rows = await readMysqlRows(target.db);
    const ids = rows.map((r) => r.id).sort();
    expect(ids).toEqual([...stalePending, ...live, ...won, ...created].sort());
    for (const r of rows) {
      if (r.id.startsWith('e-')) expect(r.fingerprint).toMatch(/^w\d$/);
    }
    const pendingIds = new Set(rows.filter((r) => r.status === 'pending').map((r) => r.id));
    for (const id of [...stalePending, ...created]) expect(pendingIds.has(id)).toBe(true);
    expect(await purgers[0]?.purge(now, 100)).toEqual([]);
  });
});
