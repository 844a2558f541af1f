import { drizzle as drizzlePostgresJs } from 'drizzle-orm/postgres-js';
import postgres from 'postgres';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { InvalidFingerprintError, InvalidKeyError, InvalidOptionError } from '../../src/index.js';
import { type AnyPgDatabase, applyPgMigrations, PgIdempotencyStore } from '../../src/pg/index.js';
import { freshServerSchema, readPgRows, type ServerSchema, serverUrl } from '../support/pg.js';

// The batching store on the real server: what each caller of a batch gets, how the batches are
// sized, and what happens when the server refuses one. The contracts run over it from the store
// table (test/contract/stores.ts); these tests make the batches happen on purpose.
const url = serverUrl() as string;

type Driver = 'node-postgres' | 'postgres-js';

const keysOf = (prefix: string, count: number) =>
  Array.from({ length: count }, (_, i) => `${prefix}-${String(i).padStart(2, '0')}`);

const claim = { expires: 1000, now: 10, leaseSeconds: 600 };

for (const driver of ['node-postgres', 'postgres-js'] as const satisfies readonly Driver[]) {
  describe(`the batching PostgreSQL store over ${driver}`, () => {
    let direct: ServerSchema;
    let store: PgIdempotencyStore<unknown>;
    let plain: PgIdempotencyStore<unknown>;
    let end: () => Promise<unknown>;

    beforeEach(async () => {
      direct = await freshServerSchema(url, 2);
      await applyPgMigrations(direct.db, { schema: direct.schema });
      let db: AnyPgDatabase;
      if (driver === 'node-postgres') {
        db = direct.db;
        end = async () => undefined;
      } else {
        const client = postgres(url, { max: 2, onnotice: () => undefined });
        db = drizzlePostgresJs({ client });
        end = () => client.end();
      }
      store = new PgIdempotencyStore(db, { schema: direct.schema, batch: true });
      plain = new PgIdempotencyStore(direct.db, { schema: direct.schema });
    });

    afterEach(async () => {
      await store.close();
      await end();
      await direct.drop();
    });

    it('sends 32 concurrent claims, finishes and replays as two statements each, then one', async () => {
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
      expect(store.batchStats()).toMatchObject({
        claims: split,
        finishes: split,
        fetches: split,
        takeovers: { calls: 0, statements: 0 },
      });
      // Now reads come in bursts: the next 32 go as one statement.
      expect(await Promise.all(keys.map((key) => store.fetch(key, 10)))).toEqual(answers);
      expect(store.batchStats()?.fetches.sizes).toEqual({ 1: 1, 31: 1, 32: 1 });
      const rows = await readPgRows(direct.db, direct.schema);
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
        on: PgIdempotencyStore<unknown>,
        prefix: string,
      ): (() => Promise<unknown>)[] => [
        () => on.acquire(`${prefix}-done`, 'a', { ...claim, now: 20 }),
        () => on.acquire(`${prefix}-done`, 'b', { ...claim, now: 20 }),
        () => on.acquire(`${prefix}-live`, 'a', { ...claim, now: 20 }),
        () => on.acquire(`${prefix}-lapsed`, 'a', { ...claim, now: 20 }),
        () => on.acquire(`${prefix}-fresh`, 'a', { ...claim, now: 20 }),
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
        undefined,
        undefined,
        undefined,
        undefined,
      ]);
      expect(together[3]).toMatchObject({ takenOver: true });
      const claims = store.batchStats()?.claims;
      expect(claims?.statements).toBeLessThan(claims?.calls ?? 0);
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
      // A key is in at most one statement at a time: three statements, one call each.
      expect(store.batchStats()?.claims).toMatchObject({ calls: 3, statements: 3 });
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
      const rows = await readPgRows(direct.db, direct.schema);
      expect(rows.map((row) => row.status)).toEqual(['done', 'pending', 'done', 'done']);
      // The first finish went alone; the fenced-out one was refused inside the batch of three.
      expect(store.batchStats()?.finishes.sizes).toEqual({ 1: 1, 3: 1 });
    });

    it('takes over the lapsed leases of many keys in one statement', async () => {
      const keys = keysOf('lapsed', 8);
      for (const key of keys) await plain.acquire(key, 'd', { ...claim, leaseSeconds: 5 });
      const taken = await Promise.all(
        keys.map((key) => store.acquire(key, 'd', { ...claim, now: 30 })),
      );
      for (const result of taken)
        expect(result).toMatchObject({ status: 'acquired', takenOver: true });
      // The first claim went alone, the other seven as one statement. Their takeovers follow as
      // the claims are answered: how they group depends on when the answers arrive, but eight
      // calls took fewer statements.
      expect(store.batchStats()?.claims.sizes).toEqual({ 1: 1, 7: 1 });
      const takeovers = store.batchStats()?.takeovers;
      expect(takeovers?.calls).toBe(8);
      expect(takeovers?.statements).toBeLessThan(8);
      const carried = Object.entries(takeovers?.sizes ?? {}).map(
        ([size, statements]) => Number(size) * statements,
      );
      expect(carried.reduce((sum, calls) => sum + calls, 0)).toBe(8);
      // The new owners' leases, at the takeover's own clock.
      const records = await Promise.all(keys.map((key) => plain.get(key)));
      expect(records.map((record) => record?.leaseUntil)).toEqual(keys.map(() => 630));
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
      expect(store.batchStats()?.claims.sizes).toEqual({ 1: 1, 2: 1 });
    });

    it('runs each call of a batch the server refused alone: only the refused one fails', async () => {
      await direct.pool.query(
        `ALTER TABLE "${direct.schema}".keys ADD CONSTRAINT short_answer CHECK (length(response) < 40)`,
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
      // The driver's error, wrapped by drizzle on the paths that go through it.
      const refused = (settled[2] as PromiseRejectedResult).reason as {
        code?: string;
        cause?: { code?: string };
      };
      expect(refused.code ?? refused.cause?.code).toBe('23514');
      const rows = await readPgRows(direct.db, direct.schema);
      expect(rows.map((row) => row.status)).toEqual(['done', 'done', 'pending', 'done']);
    });
  });
}

describe('the batch option', () => {
  it('must be a boolean', async () => {
    const direct = await freshServerSchema(url, 1);
    try {
      expect(
        () =>
          new PgIdempotencyStore(direct.db, {
            schema: direct.schema,
            batch: 'yes' as unknown as boolean,
          }),
      ).toThrow(InvalidOptionError);
      expect(new PgIdempotencyStore(direct.db, { schema: direct.schema }).batchStats()).toBe(
        undefined,
      );
    } finally {
      await direct.drop();
    }
  });
});
