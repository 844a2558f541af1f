import { drizzle } from 'drizzle-orm/mysql2';
import mysql from 'mysql2/promise';
import { afterEach, describe, expect, it } from 'vitest';
import { InvalidLimitError, InvalidOptionError, InvalidTimeError } from '../../src/index.js';
import { applyMysqlMigrations, MysqlIdempotencyStore } from '../../src/mysql/index.js';
import { tokenOf } from '../contract/lease-contract.js';
import { freshMysqlDatabase, type MysqlDatabase, mysqlUrl } from '../support/mysql.js';

// Collected only when MYSQL_URL is set (see vitest.config.ts); then an unreachable server fails.
const url = mysqlUrl() as string;

let target: MysqlDatabase;
const pools: mysql.Pool[] = [];
afterEach(async () => {
  await Promise.all(pools.splice(0).map((pool) => pool.end()));
  await target.drop();
});

async function migrated(): Promise<MysqlIdempotencyStore> {
  target = await freshMysqlDatabase(url, 2);
  await applyMysqlMigrations(target.db);
  return new MysqlIdempotencyStore(target.db);
}

const lease = (now: number, leaseSeconds = 30) => ({ expires: 1000, now, leaseSeconds });

describe('MySQL fenced leases', () => {
  it('acquires a missing key, reports it in progress, takes a lapsed lease over', async () => {
    const store = await migrated();
    const first = await store.acquire('k', 'd', lease(0));
    expect(first).toEqual({
      status: 'acquired',
      fencingToken: expect.any(Number),
      leaseUntil: 30,
      takenOver: false,
    });
    expect(await store.acquire('k', 'd', lease(29.9))).toEqual({
      status: 'inProgress',
      fencingToken: tokenOf(first),
      leaseUntil: 30,
      unrecorded: false,
    });
    expect(await store.acquire('k', 'other', lease(40))).toMatchObject({
      status: 'mismatch',
      record: { fingerprint: 'd', status: 'pending' },
    });
    const taken = await store.acquire('k', 'd', { expires: 2000, now: 30, leaseSeconds: 10 });
    expect(taken).toEqual({
      status: 'acquired',
      fencingToken: expect.any(Number),
      leaseUntil: 40,
      takenOver: true,
    });
    const second = tokenOf(taken);
    expect(second).toBeGreaterThan(tokenOf(first));
    expect(await store.get('k')).toMatchObject({
      fencingToken: second,
      leaseUntil: 40,
      expires: 2000,
    });
    expect(await store.finish('k', 'd', { r: 1 }, second)).toBe(true);
    expect(await store.acquire('k', 'd', lease(50))).toMatchObject({
      status: 'done',
      record: { response: { r: 1 }, fencingToken: second },
    });
  });

  it('fences a stalled owner: its renew, finish and release change nothing', async () => {
    const store = await migrated();
    const a = tokenOf(await store.acquire('k', 'd', lease(0, 5)));
    expect(await store.renew('k', 'd', a, 10)).toBe(true);
    const taken = await store.acquire('k', 'd', lease(10, 5));
    expect(taken).toMatchObject({ status: 'acquired', takenOver: true });
    const b = tokenOf(taken);
    expect(b).toBeGreaterThan(a);
    expect(await store.renew('k', 'd', a, 100)).toBe(false);
    expect(await store.finish('k', 'd', { from: 'A' }, a)).toBe(false);
    expect(await store.release('k', 'd', a)).toBe(false);
    expect(await store.finish('k', 'd', { from: 'B' }, b)).toBe(true);
    expect(await store.fetch('k', 0)).toEqual({ from: 'B' });
    expect(await store.release('k', 'd', b)).toBe(false);
  });

  it('never takes over a row without a lease or one marked unrecorded', async () => {
    const store = await migrated();
    await store.reserve('seed', 'd', 1);
    expect(await store.acquire('seed', 'd', lease(100))).toEqual({
      status: 'inProgress',
      fencingToken: 1,
      leaseUntil: null,
      unrecorded: false,
    });
    const u = tokenOf(await store.acquire('u', 'd', lease(0, 5)));
    expect(await store.markUnrecorded('u', 'd', u + 1)).toBe(false);
    expect(await store.markUnrecorded('u', 'd', u)).toBe(true);
    expect(await store.acquire('u', 'd', lease(100))).toEqual({
      status: 'inProgress',
      fencingToken: u,
      leaseUntil: null,
      unrecorded: true,
    });
    expect(await store.release('u', 'd', u)).toBe(false);
    expect(await store.renew('u', 'd', u, 200)).toBe(false);
  });

  it('lists pending keys with their lease state and releases them by hand', async () => {
    const store = await migrated();
    await store.acquire('live', 'd', lease(0, 100));
    const lapsed = tokenOf(await store.acquire('lapsed', 'd', lease(0, 5)));
    const unrec = tokenOf(await store.acquire('unrec', 'd', lease(0, 5)));
    expect(await store.markUnrecorded('unrec', 'd', unrec)).toBe(true);
    await store.reserve('old', 'd', 5);
    await store.reserve('young', 'd', 500);
    await store.reserve('done', 'd', 500);
    await store.finish('done', 'd', 1);
    const all = await store.pendingKeys({ now: 10 });
    expect(all.map((row) => [row.key, row.state])).toEqual([
      ['lapsed', 'lapsed'],
      ['live', 'live'],
      ['old', 'unleased'],
      ['unrec', 'unrecorded'],
      ['young', 'unleased'],
    ]);
    expect(all[0]).toEqual({
      key: 'lapsed',
      fingerprint: 'd',
      expires: 1000,
      leaseUntil: 5,
      fencingToken: lapsed,
      state: 'lapsed',
    });
    const stale = await store.pendingKeys({ now: 10, stale: true, limit: 2 });
    expect(stale.map((row) => row.key)).toEqual(['lapsed', 'old']);
    expect(await store.stats(10)).toEqual({
      pending: 5,
      done: 1,
      expired: 0,
      stalePending: 1,
      lapsed: 1,
      unrecorded: 1,
    });
    expect(await store.releasePending('done')).toBe('done');
    expect(await store.releasePending('missing')).toBe('missing');
    expect(await store.releasePending('unrec', 'other')).toBe('mismatch');
    expect(await store.releasePending('unrec', 'd')).toBe('released');
    expect(await store.releasePending('live')).toBe('released');
    expect((await store.pendingKeys({ now: 10 })).map((row) => row.key)).toEqual([
      'lapsed',
      'old',
      'young',
    ]);
  });

  it('refuses bad lease arguments with typed errors, changing nothing', async () => {
    const store = await migrated();
    const token = tokenOf(await store.acquire('k', 'd', lease(0)));
    for (const leaseSeconds of [0, -1, Number.NaN, Infinity]) {
      await expect(store.acquire('x', 'd', { ...lease(0), leaseSeconds })).rejects.toBeInstanceOf(
        InvalidOptionError,
      );
    }
    await expect(store.acquire('x', 'd', { ...lease(0), now: Number.NaN })).rejects.toBeInstanceOf(
      InvalidTimeError,
    );
    for (const attempt of [0, 1.5, Number.NaN]) {
      await expect(store.finish('k', 'd', 1, attempt)).rejects.toBeInstanceOf(InvalidOptionError);
      await expect(store.renew('k', 'd', attempt, 5)).rejects.toBeInstanceOf(InvalidOptionError);
    }
    await expect(store.pendingKeys({ now: 0, limit: 0 })).rejects.toBeInstanceOf(InvalidLimitError);
    expect(await store.get('x')).toBeNull();
    expect(await store.get('k')).toMatchObject({
      status: 'pending',
      fencingToken: token,
      leaseUntil: 30,
    });
  });

  it('16 connections contending for one lapsed key: exactly one takes it over', async () => {
    const store = await migrated();
    for (let round = 0; round < 5; round++) {
      const key = `lapsed-${round}`;
      const first = tokenOf(await store.acquire(key, 'd', lease(0, 1)));
      const contenders = Array.from({ length: 16 }, () => {
        const pool = mysql.createPool({ uri: target.url, connectionLimit: 1 });
        pools.push(pool);
        return new MysqlIdempotencyStore(drizzle({ client: pool }));
      });
      const results = await Promise.all(
        contenders.map((contender) => contender.acquire(key, 'd', lease(10))),
      );
      const winners = results.filter((result) => result.status === 'acquired');
      expect(winners).toEqual([
        { status: 'acquired', fencingToken: expect.any(Number), leaseUntil: 40, takenOver: true },
      ]);
      const won = tokenOf(winners[0]);
      expect(won).toBeGreaterThan(first);
      for (const result of results) {
        if (result.status !== 'acquired') {
          expect(result).toEqual({
            status: 'inProgress',
            fencingToken: won,
            leaseUntil: 40,
            unrecorded: false,
          });
        }
      }
      await Promise.all(pools.splice(0).map((pool) => pool.end()));
    }
  });
});
