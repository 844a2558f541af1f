import { describe, expect, it } from 'vitest';
import type { LeasedIdempotencyStore } from '../../src/index.js';
import type { RawRow } from '../contract/harness.js';

/** A fresh, migrated keys table on a real server, and the connections racing on it. */
interface ConcurrencyTarget {
  /** `count` stores on the table, each on its own single connection, already connected. */
  stores(count: number): Promise<LeasedIdempotencyStore[]>;
  /** Every row, ordered by id, read without going through a store. */
  rows(): Promise<RawRow[]>;
  /** Inserts rows directly, bypassing the stores. */
  seed(rows: RawRow[]): Promise<void>;
  /** Ends every connection `stores` opened and drops the table with what holds it. */
  drop(): Promise<void>;
}

/** One server dialect, as the concurrency suite races on it. */
export interface ConcurrencyDialect {
  /** The server's name, for the suite's name. */
  readonly name: string;
  /** A fresh, migrated keys table of its own. */
  fresh(): Promise<ConcurrencyTarget>;
  /**
   * How many of the four cleaners in the purge race delete with `sweepBatch` (in index order,
   * reporting counts) rather than `purge` (in id order, reporting ids): where the two statements
   * take their locks in different orders, they must also be raced against each other.
   */
  readonly sweepers: number;
}

const pad = (i: number) => String(i).padStart(4, '0');

/**
 * What must hold when many connections race on one server table: one winner per key for
 * reserves and for lease takeovers, and purges that delete every expired row exactly once while
 * writers re-reserve the purged keys, without ever deleting a pending row. Each test works on its
 * own fresh table, dropped at its end.
 *
 * @param dialect - the server, how to open stores on it and how its cleaners race
 */
export function describeConcurrency(dialect: ConcurrencyDialect): void {
  async function withTarget(use: (target: ConcurrencyTarget) => Promise<void>): Promise<void> {
    const target = await dialect.fresh();
    try {
      await use(target);
    } finally {
      await target.drop();
    }
  }

  describe(`${dialect.name} under real concurrency`, () => {
    it('16 connections reserving the same 500 keys: exactly one true per key', async () => {
      await withTarget(async (target) => {
        const connections = await target.stores(16);
        const keys = Array.from({ length: 500 }, (_, i) => `key-${pad(i)}`);
        const results = await Promise.all(
          connections.map(async (store, c) => {
            const won: boolean[] = [];
            for (const key of keys) won.push(await store.reserve(key, `conn-${c}`, 100));
            return won;
          }),
        );
        const rows = await target.rows();
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
    });

    it('16 connections acquiring the same 300 fresh keys: exactly one winner each, the others see its lease', async () => {
      await withTarget(async (target) => {
        const connections = await target.stores(16);
        const keys = Array.from({ length: 300 }, (_, i) => `fresh-${pad(i)}`);
        const winners = new Map<string, number[]>();
        await Promise.all(
          connections.map(async (store, c) => {
            for (const key of keys) {
              const result = await store.acquire(key, `conn-${c}`, {
                expires: 1000,
                now: 100,
                leaseSeconds: 30,
              });
              if (result.status === 'acquired') {
                expect(result).toMatchObject({ leaseUntil: 130, takenOver: false });
                winners.set(key, [...(winners.get(key) ?? []), c]);
              } else {
                // A fingerprint of its own: a loser meets the winner's row as another payload's.
                expect(result.status).toBe('mismatch');
              }
            }
          }),
        );
        const rows = await target.rows();
        expect(rows.map((row) => row.id)).toEqual(keys);
        for (const row of rows) {
          const won = winners.get(row.id) ?? [];
          expect(won).toHaveLength(1);
          expect(row).toMatchObject({ fingerprint: `conn-${won[0]}`, status: 'pending' });
        }
      });
    });

    it('16 connections taking over the same 300 lapsed keys: exactly one winner each, a greater token', async () => {
      await withTarget(async (target) => {
        const connections = await target.stores(16);
        const keys = Array.from({ length: 300 }, (_, i) => `lease-${pad(i)}`);
        const [first] = connections;
        const claimed = new Map<string, number>();
        for (const key of keys) {
          const got = await first?.acquire(key, 'd', { expires: 1000, now: 100, leaseSeconds: 30 });
          if (got?.status === 'acquired') claimed.set(key, got.fencingToken);
        }
        expect(claimed.size).toBe(keys.length);
        const winners = new Map<string, number>();
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
                expect(result).toMatchObject({ leaseUntil: 230, takenOver: true });
                expect(result.fencingToken).toBeGreaterThan(claimed.get(key) ?? Infinity);
                winners.set(key, result.fencingToken);
                won.push(key);
              } else expect(result).toMatchObject({ status: 'inProgress', leaseUntil: 230 });
            }
            return won;
          }),
        );
        expect(results.flat().sort()).toEqual(keys);
        // Every loser saw the winner's token, and the rows keep it.
        for (const key of keys) {
          expect((await first?.get(key))?.fencingToken).toBe(winners.get(key));
        }
      });
    });

    it('4 purgers with writers re-reserving purged keys: disjoint, complete, no pending row lost', async () => {
      await withTarget(async (target) => {
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
        await target.seed([
          ...expired.map((id, i) => row(id, 'done', (i % 10) + 1)),
          ...stalePending.map((id) => row(id, 'pending', 0)),
          ...live.map((id) => row(id, 'done', 1e9)),
        ]);

        const [purgers, writers] = [await target.stores(4), await target.stores(4)];
        const purgedSoFar: string[] = [];
        let purging = true;

        // The last `dialect.sweepers` of the four sweep and report counts; the others purge and
        // report their ids.
        let swept = 0;
        const purged = Promise.all(
          purgers.map(async (store, i) => {
            const mine: string[] = [];
            for (;;) {
              if (i >= purgers.length - dialect.sweepers) {
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

        // Writers race the purgers: they re-reserve keys just purged (and keys not purged yet,
        // which must be refused), finish half of what they win with a live deadline, and keep
        // adding new pending rows that are already past their deadline.
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
                if (won.length % 2 === 0) {
                  expect(await store.finish(key, `w${w}`, { w })).toBe(true);
                }
              }
              const fresh = `n-${w}-${pad(i)}`;
              expect(await store.reserve(fresh, `w${w}`, now - 1)).toBe(true);
              created.push(fresh);
            }
            return { won, created };
          }),
        );

        const [byPurger, byWriter] = await Promise.all([purged, written]);
        // Every expired row deleted exactly once, by one purger or one sweeper: the purged ids are
        // distinct expired ids, and with the swept count they make up all of them (with no
        // sweepers, the purged ids are exactly the expired ones). How purgers and sweepers split
        // the rows depends on timing and on the plan the server picks (one that finds every
        // remaining row locked by another stops early), so only the sum is fixed.
        const all = byPurger.flat();
        expect(new Set(all).size).toBe(all.length);
        const expiredIds = new Set(expired);
        expect(all.filter((id) => !expiredIds.has(id))).toEqual([]);
        expect(all.length + swept).toBe(expired.length);

        const won = byWriter.flatMap((w) => w.won);
        const created = byWriter.flatMap((w) => w.created);
        expect(new Set(won).size).toBe(won.length);
        expect(won.length).toBeGreaterThan(0);
        const rows = await target.rows();
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
  });
}
