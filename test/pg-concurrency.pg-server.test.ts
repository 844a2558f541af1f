import { drizzle } from 'drizzle-orm/node-postgres';
import pg from 'pg';
import { afterEach, describe, expect, it } from 'vitest';
import { applyPgMigrations, PgIdempotencyStore } from '../src/pg/index.js';
import type { RawRow } from './contract/harness.js';
import {
  freshServerSchema,
  readPgRows,
  type ServerSchema,
  seedPgRows,
  serverUrl,
} from './support/pg.js';

const url = serverUrl() as string;

let target: ServerSchema;
const pools: pg.Pool[] = [];
afterEach(async () => {
  await Promise.all(pools.splice(0).map((pool) => pool.end()));
  await target.drop();
});

/** `count` stores, each on its own single connection, already connected. */
async function stores(count: number): Promise<PgIdempotencyStore[]> {
  return Promise.all(
    Array.from({ length: count }, async () => {
      const pool = new pg.Pool({ connectionString: url, max: 1 });
      pools.push(pool);
      await pool.query('SELECT 1');
      return new PgIdempotencyStore(drizzle(pool), { schema: target.schema });
    }),
  );
}

async function migratedSchema(): Promise<ServerSchema> {
  const schema = await freshServerSchema(url, 2);
  await applyPgMigrations(schema.db, { schema: schema.schema });
  return schema;
}

const pad = (i: number) => String(i).padStart(4, '0');

describe('PostgreSQL under real concurrency', () => {
  it('16 connections reserving the same 500 keys: exactly one true per key', async () => {
    target = await migratedSchema();
    const connections = await stores(16);
    const keys = Array.from({ length: 500 }, (_, i) => `key-${pad(i)}`);
    const results = await Promise.all(
      connections.map(async (store, c) => {
        const won: boolean[] = [];
        for (const key of keys) won.push(await store.reserve(key, `conn-${c}`, 100));
        return won;
      }),
    );
    const rows = await readPgRows(target.db, target.schema);
    expect(rows).toHaveLength(500);
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

  it('16 connections taking over the same 300 lapsed keys: exactly one winner each, attempt 2', async () => {
    target = await migratedSchema();
    const connections = await stores(16);
    const keys = Array.from({ length: 300 }, (_, i) => `lease-${pad(i)}`);
    const [first] = connections;
    for (const key of keys) {
      await first?.acquire(key, 'd', { expires: 1000, now: 100, leaseSeconds: 30 });
    }
    const results = await Promise.all(
      connections.map(async (store) => {
        const won: string[] = [];
        for (const key of keys) {
          const result = await store.acquire(key, 'd', {
            expires: 1000,
            now: 200,
            leaseSeconds: 30,
          });
          if (result.status === 'acquired') {
            expect(result).toEqual({
              status: 'acquired',
              attempt: 2,
              leaseUntil: 230,
              takenOver: true,
            });
            won.push(key);
          } else
            expect(result).toMatchObject({ status: 'inProgress', attempt: 2, leaseUntil: 230 });
        }
        return won;
      }),
    );
    expect(results.flat().sort()).toEqual(keys);
  });

  it('4 purgers with writers re-reserving purged keys: disjoint, complete, no pending row lost', async () => {
    target = await migratedSchema();
    const now = 10;
    const expired = Array.from({ length: 5000 }, (_, i) => `e-${pad(i)}`);
    const stalePending = Array.from({ length: 200 }, (_, i) => `p-${pad(i)}`);
    const live = Array.from({ length: 200 }, (_, i) => `l-${pad(i)}`);
    const row = (id: string, status: string, expires: number): RawRow => ({
      id,
      fingerprint: 'v1',
      status,
      response: status === 'done' ? '{"v":1}' : null,
      expires,
    });
    await seedPgRows(target.db, target.schema, [
      ...expired.map((id, i) => row(id, 'done', (i % 10) + 1)),
      ...stalePending.map((id) => row(id, 'pending', 0)),
      ...live.map((id) => row(id, 'done', 1e9)),
    ]);

    const [purgers, writers] = [await stores(4), await stores(4)];
    const purgedSoFar: string[] = [];
    let purging = true;

    const purged = Promise.all(
      purgers.map(async (store) => {
        const mine: string[] = [];
        for (;;) {
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
    expect([...all].sort()).toEqual(expired);

    const won = byWriter.flatMap((w) => w.won);
    const created = byWriter.flatMap((w) => w.created);
    expect(new Set(won).size).toBe(won.length);
    expect(won.length).toBeGreaterThan(0);
    const rows = await readPgRows(target.db, target.schema);
    const ids = rows.map((r) => r.id).sort();
    expect(ids).toEqual([...stalePending, ...live, ...won, ...created].sort());
    for (const r of rows) {
      if (r.id.startsWith('e-')) expect(r.fingerprint).toMatch(/^w\d$/);
    }
    expect(await purgers[0]?.purge(now, 100)).toEqual([]);
  });
});
