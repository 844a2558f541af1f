import { drizzle } from 'drizzle-orm/mysql2';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { InvalidFingerprintError, InvalidKeyError, InvalidOptionError } from '../../src/index.js';
import {
  applyMysqlMigrations,
  MysqlIdempotencyStore,
  openMysqlStore,
} from '../../src/mysql/index.js';
import {
  freshMysqlDatabase,
  type MysqlDatabase,
  mysqlUrl,
  readMysqlRows,
} from '../support/mysql.js';

// The batching store on the real server: what each caller of a batch gets, how the batches are
// sized, and what happens when the server refuses one. The contracts run over it from the store
// table (test/contract/stores.ts); these tests make the batches happen on purpose.
const url = mysqlUrl() as string;

type Path = 'mysql2' | 'drizzle';

const keysOf = (prefix: string, count: number) =>
  Array.from({ length: count }, (_, i) => `${prefix}-${String(i).padStart(2, '0')}`);

const claim = { expires: 1000, now: 10, leaseSeconds: 600 };

// How many calls the statements of one kind carried, whatever their sizes.
const carried = (sizes: Readonly<Record<number, number>> | undefined) =>
  Object.entries(sizes ?? {}).reduce((sum, [size, count]) => sum + Number(size) * count, 0);

for (const path of ['mysql2', 'drizzle'] as const satisfies readonly Path[]) {
  describe(`the batching MySQL store, statements through ${path}`, () => {
    let database: MysqlDatabase;
    let store: MysqlIdempotencyStore<unknown>;
    let plain: MysqlIdempotencyStore<unknown>;

    beforeEach(async () => {
      database = await freshMysqlDatabase(url, 4);
      await applyMysqlMigrations(database.db);
      // With a logger, the single-row statements go through drizzle too.
      const db =
        path === 'mysql2'
          ? database.db
          : drizzle({ client: database.pool, logger: { logQuery: () => undefined } });
      store = new MysqlIdempotencyStore(db, { batch: true });
      plain = new MysqlIdempotencyStore(database.db);
    });

    afterEach(async () => {
      await store.close();
      await database.drop();
    });

    it('sends 32 concurrent claims, finishes and replays as a few statements each', async () => {
      const keys = keysOf('burst', 32);
      const claims = await Promise.all(keys.map((key) => store.acquire(key, 'd', claim)));
      expect(claims.map((result) => result.status)).toEqual(keys.map(() => 'acquired'));
      const finished = await Promise.all(
        keys.map((key, i) => {
          const result = claims[i];
          if (result?.status !== 'acquired') throw new Error('not acquired');
          return store.finish(key, 'd', { n: i }, result.fencingToken);
        }),
      );
      expect(finished).toEqual(keys.map(() => true));
      const answers = await Promise.all(keys.map((key) => store.fetch(key, 10)));
      expect(answers).toEqual(keys.map((_, i) => ({ n: i })));
      // Each kind's first call went alone (the store was quiet), the other 31 together.
      const split = { calls: 32, statements: 2, sizes: { 1: 1, 31: 1 } };
      const stats = store.batchStats();
      expect(stats).toMatchObject({ finishes: split, fetches: split });
      // A claim reads the key first, then inserts it: the inserts follow the reads as they are
      // answered, so how they group depends on when the answers arrive.
      expect(stats?.claims.calls).toBe(32);
      expect(stats?.claims.statements).toBeLessThan(8);
      expect(carried(stats?.claims.sizes)).toBe(32);
      expect(stats?.gets.statements).toBeLessThan(8);
      // Now reads come in bursts: the next 32 go as one statement.
      expect(await Promise.all(keys.map((key) => store.fetch(key, 10)))).toEqual(answers);
      expect(store.batchStats()?.fetches.sizes).toEqual({ 1: 1, 31: 1, 32: 1 });
      const rows = await readMysqlRows(database.db);
      expect(rows.map((row) => [row.id, row.status])).toEqual(keys.map((key) => [key, 'done']));
    });

    it('gives each caller of one batch the answer the plain store gives', async () => {
      // The same keys in two namespaces: the plain store answers one call at a time, the
      // batching store all of them in one turn.
      const seed = async (prefix: string) => {
        const done = await plain.acquire(`${prefix}-done`, 'a', claim);
        if (done.status !== 'acquired') throw new Error('seed');
        await plain.finish(`${prefix}-done`, 'a', { seeded: true }, done.fencingToken);
        await plain.acquire(`${prefix}-live`, 'a', claim);
        await plain.acquire(`${prefix}-lapsed`, 'a', { ...claim, leaseSeconds: 5 });
      };
      await seed('plain');
      await seed('batch');
      const calls = (
        on: MysqlIdempotencyStore<unknown>,
        prefix: string,
      ): (() => Promise<unknown>)[] => [
        () => on.acquire(`${prefix}-done`, 'a', { ...claim, now: 20 }),
        () => on.acquire(`${prefix}-done`, 'b', { ...claim, now: 20 }),
        () => on.acquire(`${prefix}-live`, 'a', { ...claim, now: 20 }),
        () => on.acquire(`${prefix}-lapsed`, 'a', { ...claim, now: 20 }),
        () => on.acquire(`${prefix}-fresh`, 'a', { ...claim, now: 20 }),
        () => on.acquire(`${prefix}-fresh-2`, 'a', { ...claim, now: 20 }),
        () => on.fetch(`${prefix}-done`, 20),
        () => on.fetch(`${prefix}-done`, 2000),
        () => on.fetch(`${prefix}-live`, 20),
        () => on.get(`${prefix}-missing`),
      ];
      const alone: unknown[] = [];
      for (const call of calls(plain, 'plain')) alone.push(await call());
      const together = await Promise.all(calls(store, 'batch').map((call) => call()));
      // Keys and fencing tokens differ between the namespaces; the rest must not.
      const shape = (value: unknown) =>
        JSON.parse(
          JSON.stringify(value, (name, field) =>
            name === 'fencingToken' ? typeof field : name === 'key' ? undefined : field,
          ),
        );
      expect(together.map(shape)).toEqual(alone.map(shape));
      expect(together.map((result) => (result as { status?: string } | null)?.status)).toEqual([
        'done',
        'mismatch',
        'inProgress',
        'acquired',
        'acquired',
        'acquired',
        undefined,
        undefined,
        undefined,
        undefined,
      ]);
      expect(together[3]).toMatchObject({ takenOver: true });
      const gets = store.batchStats()?.gets;
      expect(gets?.statements).toBeLessThan(gets?.calls ?? 0);
    });

    it('answers two callers of one key in one turn in call order: the first acquires', async () => {
      const [first, second, third] = await Promise.all([
        store.acquire('twice', 'a', claim),
        store.acquire('twice', 'a', claim),
        store.acquire('twice', 'b', claim),
      ]);
      expect(first?.status).toBe('acquired');
      expect(second?.status).toBe('inProgress');
      expect(third?.status).toBe('mismatch');
      // A key is in at most one statement at a time: three reads, one call each.
      expect(store.batchStats()?.gets).toMatchObject({ calls: 3, statements: 3 });
    });

    it('refuses a fenced-out finish in a batch while its neighbours finish', async () => {
      const keys = keysOf('fence', 4);
      const claims = await Promise.all(
        keys.map((key) => store.acquire(key, 'd', { ...claim, leaseSeconds: 5 })),
      );
      // Another worker takes over the second key's lapsed lease.
      const thief = await plain.acquire(keys[1] as string, 'd', { ...claim, now: 30 });
      expect(thief).toMatchObject({ status: 'acquired', takenOver: true });
      const finished = await Promise.all(
        keys.map((key, i) => {
          const result = claims[i];
          if (result?.status !== 'acquired') throw new Error('not acquired');
          return store.finish(key, 'd', { by: 'first' }, result.fencingToken);
        }),
      );
      expect(finished).toEqual([true, false, true, true]);
      const rows = await readMysqlRows(database.db);
      expect(rows.map((row) => row.status)).toEqual(['done', 'pending', 'done', 'done']);
      // The thief's row kept its lease and got no answer.
      expect(await plain.get(keys[1] as string)).toMatchObject({ status: 'pending' });
      // The first finish went alone; the fenced-out one was refused inside the batch of three.
      expect(store.batchStats()?.finishes.sizes).toEqual({ 1: 1, 3: 1 });
    });

    it('runs a batch of claims that meets existing keys call by call: each takes over', async () => {
      const lapsed = keysOf('lapsed', 4);
      for (const key of lapsed) await plain.acquire(key, 'd', { ...claim, leaseSeconds: 5 });
      const fresh = keysOf('new', 4);
      const taken = await Promise.all(
        [...lapsed, ...fresh].map((key) => store.acquire(key, 'd', { ...claim, now: 30 })),
      );
      expect(
        taken.map((result) => [result.status, 'takenOver' in result && result.takenOver]),
      ).toEqual([...lapsed.map(() => ['acquired', true]), ...fresh.map(() => ['acquired', false])]);
      // The new owners' leases, at the takeover's own clock.
      const records = await Promise.all(lapsed.map((key) => plain.get(key)));
      expect(records.map((record) => record?.leaseUntil)).toEqual(lapsed.map(() => 630));
      expect(carried(store.batchStats()?.claims.sizes)).toBe(8);
    });

    it('rejects a bad argument of one caller before batching; its neighbours go on', async () => {
      const settled = await Promise.allSettled([
        store.acquire('good-1', 'd', claim),
        store.acquire('', 'd', claim),
        store.acquire('good-2', '', claim),
        store.acquire('good-3', 'd', claim),
        store.acquire('good-4', 'd', claim),
      ]);
      expect(settled.map((result) => result.status)).toEqual([
        'fulfilled',
        'rejected',
        'rejected',
        'fulfilled',
        'fulfilled',
      ]);
      expect((settled[1] as PromiseRejectedResult).reason).toBeInstanceOf(InvalidKeyError);
      expect((settled[2] as PromiseRejectedResult).reason).toBeInstanceOf(InvalidFingerprintError);
      expect(store.batchStats()?.gets.sizes).toEqual({ 1: 1, 2: 1 });
    });

    it('runs each call of a batch the server refused alone: only the refused one fails', async () => {
      await database.pool.query(
        'ALTER TABLE `keys` ADD CONSTRAINT short_answer CHECK (char_length(response) < 40)',
      );
      const keys = keysOf('refused', 4);
      const claims = await Promise.all(keys.map((key) => store.acquire(key, 'd', claim)));
      const settled = await Promise.allSettled(
        keys.map((key, i) => {
          const result = claims[i];
          if (result?.status !== 'acquired') throw new Error('not acquired');
          const answer = i === 2 ? 'x'.repeat(100) : 'short';
          return store.finish(key, 'd', answer, result.fencingToken);
        }),
      );
      expect(settled.map((result) => result.status)).toEqual([
        'fulfilled',
        'fulfilled',
        'rejected',
        'fulfilled',
      ]);
      // The server's refusal of the one answer, as the plain store gets it.
      const refused = (settled[2] as PromiseRejectedResult).reason as {
        sqlState?: string;
        cause?: { sqlState?: string };
      };
      expect(refused.sqlState ?? refused.cause?.sqlState).toBe('23000');
      const rows = await readMysqlRows(database.db);
      expect(rows.map((row) => row.status)).toEqual(['done', 'done', 'pending', 'done']);
      // The refused statement of three is counted once; its calls then ran alone, unbatched.
      expect(store.batchStats()?.finishes.sizes).toEqual({ 1: 1, 3: 1 });
    });
  });
}

describe('the batch option on MySQL', () => {
  it('must be a boolean', async () => {
    const database = await freshMysqlDatabase(url, 1);
    try {
      expect(
        () => new MysqlIdempotencyStore(database.db, { batch: 'yes' as unknown as boolean }),
      ).toThrow(InvalidOptionError);
      expect(new MysqlIdempotencyStore(database.db).batchStats()).toBe(undefined);
    } finally {
      await database.drop();
    }
  });

  it('is taken by openMysqlStore', async () => {
    const database = await freshMysqlDatabase(url, 1);
    const store = await openMysqlStore(database.url, { batch: true });
    try {
      await Promise.all(['a', 'b', 'c'].map((key) => store.acquire(key, 'd', claim)));
      expect(store.batchStats()?.gets.calls).toBe(3);
    } finally {
      await store.close();
      await database.drop();
    }
  });
});
