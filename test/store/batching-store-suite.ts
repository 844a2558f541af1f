import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { AsyncIdempotencyStore } from '../../src/core/async-store.js';
import type { BatchSizes } from '../../src/core/statement-batch.js';
import { InvalidFingerprintError, InvalidKeyError, InvalidOptionError } from '../../src/index.js';
import type { RawRow } from '../contract/harness.js';

/** The statistics every batching store keeps, per kind of batched statement. */
interface BatchStats {
  readonly claims: BatchSizes;
  readonly finishes: BatchSizes;
  readonly fetches: BatchSizes;
  readonly gets: BatchSizes;
}

/** A store that may batch its statements, and says how it sent them when it does. */
type BatchingStore = AsyncIdempotencyStore<unknown> & { batchStats(): BatchStats | undefined };

/** A fresh schema or database on the server, with the migrations applied, and stores over it. */
export interface BatchingStoreDatabase<S extends BatchingStore> {
  /** The store under test: `batch: true`, over the driver its suite names. */
  readonly store: S;
  /** A store without batching on the same table, which answers one call at a time. */
  readonly plain: S;
  /** Every row of the table, ordered by key. */
  rows(): Promise<RawRow[]>;
  /** Makes the server refuse any answer of 40 characters or more (a CHECK on `response`). */
  refuseLongAnswers(): Promise<void>;
  /** Closes the stores and any client of their own, and drops the schema or database. */
  drop(): Promise<void>;
}

/** A fresh schema or database, with nothing in it, and how to make stores on it. */
interface EmptyDatabase<S extends BatchingStore> {
  /** Makes a store on it with `options` and none of the suite's others. */
  store(options: { readonly batch?: boolean }): S;
  /** Drops the schema or database, and ends the client of its own. */
  drop(): Promise<void>;
}

/** A store that owns its pool, and how to be rid of it and of its database. */
interface OwnedStore<S extends BatchingStore> {
  readonly store: S;
  /** Closes the store and drops its database. */
  drop(): Promise<void>;
}

/** What the suite needs of one dialect, and the truths in which dialects differ. */
export interface BatchingStoreDialect<S extends BatchingStore> {
  /** The dialect, as the titles name it: `PostgreSQL`, `MySQL`. */
  readonly name: string;
  /** Each way the batching store reaches the server (a suite each), by a title's end. */
  readonly paths: Readonly<Record<string, () => Promise<BatchingStoreDatabase<S>>>>;
  /**
   * The kind of batched statement that starts a claim, whose calls and sizes therefore follow the
   * `acquire` calls one to one: PostgreSQL claims (inserts or reads) at once; MySQL reads first.
   */
  readonly claimStart: keyof BatchStats;
  /** The statistics of a burst of 32 claims of the kinds only this dialect keeps. */
  readonly burstStats?: Readonly<Record<string, unknown>>;
  /** Where the driver puts the SQLSTATE of the server's refusal, and the one a CHECK gets. */
  readonly refusal: { readonly field: string; readonly state: string };
  /** Creates an empty schema or database, whose pool has a connection or so. */
  empty(): Promise<EmptyDatabase<S>>;
  /** A store opened from a new database's URL by the dialect's `open…Store`, `batch: true`. */
  openFromUrl(): Promise<OwnedStore<S>>;
  /** The dialect's own tests, in each path's suite; `current` is the database of the test. */
  more?(current: () => BatchingStoreDatabase<S>): void;
}

/** Keys `prefix-00`, `prefix-01`… in byte order, the order the table's rows come back in. */
export const keysOf = (prefix: string, count: number): string[] =>
  Array.from({ length: count }, (_, i) => `${prefix}-${String(i).padStart(2, '0')}`);

/** A claim at second 10 with a lease of ten minutes. */
export const claim = { expires: 1000, now: 10, leaseSeconds: 600 };

/** How many calls the statements of one kind carried, whatever their sizes. */
export const carried = (sizes: Readonly<Record<number, number>> | undefined): number =>
  Object.entries(sizes ?? {}).reduce((sum, [size, count]) => sum + Number(size) * count, 0);

/**
 * The batching store (`batch: true`) on a real server: what each caller of a batch gets, how the
 * batches are sized, and what happens when the server refuses one. The contracts run over it from
 * the store table (test/contract/stores.ts); these tests make the batches happen on purpose.
 *
 * @param dialect - how to open the stores, and the truths in which the dialect differs
 */
export function describeBatchingStore<S extends BatchingStore>(
  dialect: BatchingStoreDialect<S>,
): void {
  for (const [path, open] of Object.entries(dialect.paths)) {
    describe(`the batching ${dialect.name} store ${path}`, () => {
      let database: BatchingStoreDatabase<S> | undefined;
      const current = () => {
        if (database === undefined) throw new Error('no database: not inside a test');
        return database;
      };

      beforeEach(async () => {
        database = await open();
      });

      afterEach(async () => {
        await current().drop();
        database = undefined;
      });

      it('sends 32 concurrent claims, finishes and replays as a few statements each', async () => {
        const { store, rows } = current();
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
        expect(stats).toMatchObject({
          [dialect.claimStart]: split,
          finishes: split,
          fetches: split,
          ...dialect.burstStats,
        });
        // A dialect whose claim reads first inserts as the reads are answered, so how its inserts
        // group depends on when the answers arrive: few statements carried all 32 all the same.
        expect(stats?.claims.calls).toBe(32);
        expect(stats?.claims.statements).toBeLessThan(8);
        expect(carried(stats?.claims.sizes)).toBe(32);
        // Now reads come in bursts: the next 32 go as one statement.
        expect(await Promise.all(keys.map((key) => store.fetch(key, 10)))).toEqual(answers);
        expect(store.batchStats()?.fetches.sizes).toEqual({ 1: 1, 31: 1, 32: 1 });
        expect((await rows()).map((row) => [row.id, row.status])).toEqual(
          keys.map((key) => [key, 'done']),
        );
      });

      it('gives each caller of one batch the answer the plain store gives', async () => {
        const { store, plain } = current();
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
        const calls = (on: S, prefix: string): (() => Promise<unknown>)[] => [
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
        const starts = store.batchStats()?.[dialect.claimStart];
        expect(starts?.statements).toBeLessThan(starts?.calls ?? 0);
      });

      it('answers two callers of one key in one turn in call order: the first acquires', async () => {
        const { store } = current();
        const [first, second, third] = await Promise.all([
          store.acquire('twice', 'a', claim),
          store.acquire('twice', 'a', claim),
          store.acquire('twice', 'b', claim),
        ]);
        expect(first?.status).toBe('acquired');
        expect(second?.status).toBe('inProgress');
        expect(third?.status).toBe('mismatch');
        // A key is in at most one statement at a time: three statements, one call each.
        expect(store.batchStats()?.[dialect.claimStart]).toMatchObject({
          calls: 3,
          statements: 3,
        });
      });

      it('refuses a fenced-out finish in a batch while its neighbours finish', async () => {
        const { store, plain, rows } = current();
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
        expect((await rows()).map((row) => row.status)).toEqual([
          'done',
          'pending',
          'done',
          'done',
        ]);
        // The thief's row kept its lease and got no answer.
        expect(await plain.get(keys[1] as string)).toMatchObject({ status: 'pending' });
        // The first finish went alone; the fenced-out one was refused inside the batch of three.
        expect(store.batchStats()?.finishes.sizes).toEqual({ 1: 1, 3: 1 });
      });

      it('answers a batch of claims that meets existing keys: each lapsed one is taken over', async () => {
        const { store, plain } = current();
        const lapsed = keysOf('lapsed', 4);
        for (const key of lapsed) await plain.acquire(key, 'd', { ...claim, leaseSeconds: 5 });
        const fresh = keysOf('new', 4);
        const taken = await Promise.all(
          [...lapsed, ...fresh].map((key) => store.acquire(key, 'd', { ...claim, now: 30 })),
        );
        expect(
          taken.map((result) => [result.status, 'takenOver' in result && result.takenOver]),
        ).toEqual([
          ...lapsed.map(() => ['acquired', true]),
          ...fresh.map(() => ['acquired', false]),
        ]);
        // The new owners' leases, at the takeover's own clock.
        const records = await Promise.all(lapsed.map((key) => plain.get(key)));
        expect(records.map((record) => record?.leaseUntil)).toEqual(lapsed.map(() => 630));
        expect(carried(store.batchStats()?.claims.sizes)).toBe(8);
      });

      it('rejects a bad argument of one caller before batching; its neighbours go on', async () => {
        const { store } = current();
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
        expect((settled[2] as PromiseRejectedResult).reason).toBeInstanceOf(
          InvalidFingerprintError,
        );
        expect(store.batchStats()?.[dialect.claimStart].sizes).toEqual({ 1: 1, 2: 1 });
      });

      it('runs each call of a batch the server refused alone: only the refused one fails', async () => {
        const { store, rows, refuseLongAnswers } = current();
        await refuseLongAnswers();
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
        // The driver's error as the plain store gets it, wrapped by drizzle on the paths that go
        // through it.
        const refused = (settled[2] as PromiseRejectedResult).reason as Record<string, unknown> & {
          cause?: Record<string, unknown>;
        };
        const { field, state } = dialect.refusal;
        expect(refused[field] ?? refused.cause?.[field]).toBe(state);
        expect((await rows()).map((row) => row.status)).toEqual([
          'done',
          'done',
          'pending',
          'done',
        ]);
        // The refused statement of three is counted once; its calls then ran alone, unbatched.
        expect(store.batchStats()?.finishes.sizes).toEqual({ 1: 1, 3: 1 });
      });

      dialect.more?.(current);
    });
  }

  describe(`the batch option on ${dialect.name}`, () => {
    it('must be a boolean', async () => {
      const database = await dialect.empty();
      try {
        expect(() => database.store({ batch: 'yes' as unknown as boolean })).toThrow(
          InvalidOptionError,
        );
        expect(database.store({}).batchStats()).toBe(undefined);
      } finally {
        await database.drop();
      }
    });

    it('is taken by the store opened from a URL', async () => {
      const { store, drop } = await dialect.openFromUrl();
      try {
        await Promise.all(['a', 'b', 'c'].map((key) => store.acquire(key, 'd', claim)));
        expect(store.batchStats()?.[dialect.claimStart].calls).toBe(3);
      } finally {
        await drop();
      }
    });
  });
}
