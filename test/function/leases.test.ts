import { eq, sql } from 'drizzle-orm';
import { integer, sqliteTable, text } from 'drizzle-orm/sqlite-core';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import {
  CallInProgressError,
  CallOutcomeUnknownError,
  CallSupersededError,
  makeIdempotent,
  payloadFingerprint,
  ResultNotRecordedError,
} from '../../src/function/index.js';
import type { IdempotencyStore, LeasedIdempotencyStore } from '../../src/index.js';
import { libsqlTransaction, openLibsqlStore } from '../../src/libsql/index.js';
import { openSqliteStore, sqliteTransaction } from '../../src/sqlite/index.js';
import { fileUrl } from '../support/libsql-harness.js';
import { storeFactories } from '../support/store-factories.js';
import { freshDbPath, tempDir } from '../support/temp.js';
import { deferred, until } from '../support/waiting.js';

describe.each(storeFactories())('makeIdempotent with leases on $name', (factory) => {
  let store: LeasedIdempotencyStore<unknown>;
  let close: () => Promise<void>;

  beforeEach(async () => {
    let opened: IdempotencyStore<unknown>;
    ({ store: opened, close } = await factory.open());
    store = opened as LeasedIdempotencyStore<unknown>;
  });
  afterEach(async () => {
    await close();
  });

  it('takes over the key of a call that died, once its lease lapsed', async () => {
    let clock = 1000;
    const fingerprint = payloadFingerprint(['k']);
    // A call that claimed the key and died: its lease runs until 1010.
    const dead = await store.acquire('k', fingerprint, {
      expires: 9999,
      now: clock,
      leaseSeconds: 10,
    });
    expect(dead.status).toBe('acquired');
    let runs = 0;
    const job = makeIdempotent(
      async (_id: string) => {
        runs += 1;
        return 'ran';
      },
      { store, key: (id) => id, leaseSeconds: 10, now: () => clock },
    );
    const error = await job('k').catch((e: unknown) => e);
    expect(error).toBeInstanceOf(CallInProgressError);
    expect((error as CallInProgressError).leaseUntil).toBe(1010);
    expect(runs).toBe(0);
    clock = 1010;
    expect(await job('k')).toBe('ran');
    expect(await job('k')).toBe('ran');
    expect(runs).toBe(1);
    const record = await store.get('k');
    expect(record?.status).toBe('done');
    expect(record?.fencingToken).toBeGreaterThan(
      dead.status === 'acquired' ? dead.fencingToken : Infinity,
    );
  });

  it('refuses the result of a stalled call whose key was taken over: the answer is the new owner’s', async () => {
    let clock = 1000;
    const gate = deferred();
    const started = deferred();
    let runs = 0;
    const job = makeIdempotent(
      async (_id: string) => {
        runs += 1;
        const run = runs;
        if (run === 1) {
          started.resolve();
          await gate.promise;
        }
        return `run ${run}`;
      },
      { store, key: (id) => id, leaseSeconds: 10, now: () => clock },
    );
    const stalled = job('k').catch((e: unknown) => e);
    await started.promise;
    const first = (await store.get('k'))?.fencingToken as number;
    clock = 1020;
    expect(await job('k')).toBe('run 2');
    gate.resolve();
    const error = await stalled;
    expect(error).toBeInstanceOf(ResultNotRecordedError);
    expect((error as ResultNotRecordedError).result).toBe('run 1');
    const record = await store.get('k');
    expect(record).toMatchObject({ status: 'done', response: { value: 'run 2' } });
    expect(record?.fencingToken).toBeGreaterThan(first);
    expect(await job('k')).toBe('run 2');
  });

  // The ABA of issue 26 through makeIdempotent: A freezes past its lease, B takes the key over and
  // throws (its key is released), C claims the key afresh; then A wakes up. `late` is what A does.
  async function aba(late: 'returns' | 'throws') {
    let clock = 1000;
    const gates = { a: deferred(), c: deferred() };
    const started = { a: deferred(), c: deferred() };
    let runs = 0;
    const job = makeIdempotent(
      async (_id: string) => {
        runs += 1;
        if (runs === 1) {
          started.a.resolve();
          await gates.a.promise;
          if (late === 'throws') throw new Error('A wakes up and throws');
          return 'A';
        }
        if (runs === 2) throw new Error('B fails');
        started.c.resolve();
        await gates.c.promise;
        return 'C';
      },
      { store, key: (id) => id, leaseSeconds: 10, now: () => clock },
    );
    const a = job('k').catch((e: unknown) => e);
    await started.a.promise;
    clock = 1020;
    await expect(job('k')).rejects.toThrow('B fails');
    expect(await store.get('k')).toBeNull();
    const c = job('k');
    await started.c.promise;
    const token = (await store.get('k'))?.fencingToken;
    gates.a.resolve();
    const lateA = await a;
    // A's fenced writes (its answer, or the release after its throw) leave C's row alone.
    expect(await store.get('k')).toMatchObject({ status: 'pending', fencingToken: token });
    // A duplicate D while C runs is told the call is in progress.
    await expect(job('k')).rejects.toBeInstanceOf(CallInProgressError);
    gates.c.resolve();
    expect(await c).toBe('C');
    expect(await job('k')).toBe('C');
    expect(await store.get('k')).toMatchObject({ status: 'done', response: { value: 'C' } });
    expect(runs).toBe(3);
    return lateA;
  }

  it("refuses A's late result after B released the key and C claimed it again: C's result is stored (ABA)", async () => {
    const lateA = await aba('returns');
    expect(lateA).toBeInstanceOf(ResultNotRecordedError);
    expect((lateA as ResultNotRecordedError).result).toBe('A');
  });

  it("keeps C's key when A throws late after B released it and C claimed it again (ABA)", async () => {
    const lateA = await aba('throws');
    expect((lateA as Error).message).toBe('A wakes up and throws');
  });

  it("refuses the old call's result after an operator released its live key and a new call claimed it", async () => {
    const gates = [deferred(), deferred()];
    const started = [deferred(), deferred()];
    let runs = 0;
    const job = makeIdempotent(
      async (_id: string) => {
        const run = runs++;
        started[run]?.resolve();
        await gates[run]?.promise;
        return `run ${run + 1}`;
      },
      { store, key: (id) => id, leaseSeconds: 10, now: () => 1000 },
    );
    const old = job('k').catch((e: unknown) => e);
    await started[0]?.promise;
    expect(await store.releasePending('k')).toBe('released');
    const fresh = job('k');
    await started[1]?.promise;
    gates[0]?.resolve();
    expect(await old).toBeInstanceOf(ResultNotRecordedError);
    expect(await store.get('k')).toMatchObject({ status: 'pending', response: null });
    gates[1]?.resolve();
    expect(await fresh).toBe('run 2');
    expect(await job('k')).toBe('run 2');
    expect(runs).toBe(2);
  });

  it('marks a key whose result could not be recorded, so it is never taken over', async () => {
    let clock = 1000;
    let runs = 0;
    const job = makeIdempotent(
      async (_id: string) => {
        runs += 1;
        return { total: 10 };
      },
      // Waiting is pointless for a key that waits for an operator: the call must not wait. A codec
      // that fails in its own way leaves the result unrecorded (the default codec stores any shape).
      {
        store,
        key: (id) => id,
        leaseSeconds: 10,
        now: () => clock,
        wait: { timeoutMs: 600_000 },
        result: {
          serialize: () => {
            throw new Error('the codec failed');
          },
          deserialize: (text: string) => JSON.parse(text) as { total: number },
        },
      },
    );
    await expect(job('k')).rejects.toBeInstanceOf(ResultNotRecordedError);
    expect(await store.get('k')).toMatchObject({ status: 'pending', unrecorded: true });
    clock = 5000;
    await expect(job('k')).rejects.toBeInstanceOf(CallOutcomeUnknownError);
    expect(runs).toBe(1);
  });

  it('renews the lease of a call that runs past it, so it keeps its key', async () => {
    const gate = deferred();
    let runs = 0;
    const slow = makeIdempotent(
      async (_id: string) => {
        runs += 1;
        await gate.promise;
        return 'slow';
      },
      { store, key: (id) => id, leaseSeconds: 0.3 },
    );
    const first = slow('k');
    await until(async () => (await store.get('k')) !== null);
    const { leaseUntil: claimed, fencingToken: token } = (await store.get('k')) as {
      leaseUntil: number;
      fencingToken: number;
    };
    // Three renewals past the first deadline: the call has outlived its lease three times over.
    await until(async () => ((await store.get('k'))?.leaseUntil as number) > claimed + 0.9);
    await expect(slow('k')).rejects.toBeInstanceOf(CallInProgressError);
    gate.resolve();
    expect(await first).toBe('slow');
    expect(await store.get('k')).toMatchObject({ status: 'done', fencingToken: token });
    expect(runs).toBe(1);
  });
});

// A view of `store` whose first `acquire` pauses after claiming the key, before the transaction
// begins, until `gate` resolves; `claimed` resolves once it has claimed.
function stallFirstAcquire<S extends LeasedIdempotencyStore<unknown>>(store: S) {
  const claimed = deferred();
  const gate = deferred();
  let acquires = 0;
  const stalling = new Proxy(store, {
    get(target, property) {
      if (property !== 'acquire') {
        const value = Reflect.get(target, property);
        return typeof value === 'function' ? value.bind(target) : value;
      }
      return async (...args: Parameters<LeasedIdempotencyStore<unknown>['acquire']>) => {
        const result = await (store as LeasedIdempotencyStore<unknown>).acquire(...args);
        acquires += 1;
        if (acquires === 1) {
          claimed.resolve();
          await gate.promise;
        }
        return result;
      };
    },
  });
  return { stalling, claimed: claimed.promise, release: gate.resolve };
}

describe('transactional makeIdempotent with leases on SQLite', () => {
  const dir = tempDir('idem-lease-tx-');
  const effects = sqliteTable('effects', { run: integer('run').notNull(), key: text('key') });

  it('rolls back a stalled call whose key was taken over: only the new owner’s effect stays (better-sqlite3)', async () => {
    const store = openSqliteStore(freshDbPath(dir));
    store.db.run(sql`CREATE TABLE effects (run INTEGER NOT NULL, key TEXT NOT NULL)`);
    let clock = 1000;
    const { stalling, claimed, release } = stallFirstAcquire(store);
    let runs = 0;
    const job = makeIdempotent(
      (tx, id: string) => {
        runs += 1;
        tx.insert(effects).values({ run: runs, key: id }).run();
        return runs;
      },
      {
        transaction: sqliteTransaction(stalling),
        key: (id) => id,
        leaseSeconds: 10,
        now: () => clock,
      },
    );
    const stalled = job('k').catch((e: unknown) => e);
    await claimed;
    const first = store.get('k')?.fencingToken as number;
    clock = 1020;
    expect(await job('k')).toBe(1);
    release();
    const error = await stalled;
    expect(error).toBeInstanceOf(CallSupersededError);
    // The code of a superseded run, the same as the HTTP layer's request-superseded problem.
    expect((error as CallSupersededError).code).toBe('IDEMPOTENCY_REQUEST_SUPERSEDED');
    expect(store.db.select().from(effects).where(eq(effects.key, 'k')).all()).toEqual([
      { run: 1, key: 'k' },
    ]);
    expect(store.get('k')).toMatchObject({ status: 'done', response: { value: 1 } });
    expect(store.get('k')?.fencingToken).toBeGreaterThan(first);
    store.close();
  });

  it('rolls back a stalled call whose key was taken over: only the new owner’s effect stays (libSQL)', async () => {
    const store = await openLibsqlStore(fileUrl(freshDbPath(dir)));
    await store.db.run(sql`CREATE TABLE effects (run INTEGER NOT NULL, key TEXT NOT NULL)`);
    let clock = 1000;
    const { stalling, claimed, release } = stallFirstAcquire(store);
    let runs = 0;
    const job = makeIdempotent(
      async (tx, id: string) => {
        runs += 1;
        await tx.insert(effects).values({ run: runs, key: id });
        return runs;
      },
      {
        transaction: libsqlTransaction(stalling),
        key: (id) => id,
        leaseSeconds: 10,
        now: () => clock,
      },
    );
    const stalled = job('k').catch((e: unknown) => e);
    await claimed;
    const first = (await store.get('k'))?.fencingToken as number;
    clock = 1020;
    expect(await job('k')).toBe(1);
    release();
    expect(await stalled).toBeInstanceOf(CallSupersededError);
    expect(await store.db.select().from(effects).where(eq(effects.key, 'k'))).toEqual([
      { run: 1, key: 'k' },
    ]);
    const record = await store.get('k');
    expect(record).toMatchObject({ status: 'done', response: { value: 1 } });
    expect(record?.fencingToken).toBeGreaterThan(first);
    await store.close();
  });

  it('queues lease renewals behind a libSQL transaction that holds the write lock, none failing', async () => {
    const store = await openLibsqlStore(fileUrl(freshDbPath(dir)));
    await store.db.run(sql`CREATE TABLE effects (run INTEGER NOT NULL, key TEXT NOT NULL)`);
    let renewals = 0;
    let failed = 0;
    const tokens: number[] = [];
    const counting = new Proxy(store, {
      get(target, property) {
        const value = Reflect.get(target, property);
        if (property === 'acquire') {
          return async (...args: Parameters<typeof store.acquire>) => {
            const result = await store.acquire(...args);
            if (result.status === 'acquired') tokens.push(result.fencingToken);
            return result;
          };
        }
        if (property === 'renew') {
          return (...args: Parameters<typeof store.renew>) => {
            renewals += 1;
            return store.renew(...args).catch((error: unknown) => {
              failed += 1;
              throw error;
            });
          };
        }
        return typeof value === 'function' ? value.bind(target) : value;
      },
    });
    const start = Date.now() / 1000;
    const job = makeIdempotent(
      async (tx, id: string) => {
        await tx.insert(effects).values({ run: 1, key: id });
        // Outlive several heartbeat periods (a third of the lease each) inside the transaction.
        await until(() => Date.now() / 1000 > start + 0.5);
        return 'ran';
      },
      { transaction: libsqlTransaction(counting), key: (id) => id, leaseSeconds: 0.15 },
    );
    expect(await job('k')).toBe('ran');
    // Without the client's write queue, each renewal would have waited for the lock on the event
    // loop itself, until the busy timeout and SQLITE_BUSY.
    expect(renewals).toBeGreaterThan(0);
    expect(failed).toBe(0);
    expect(tokens).toHaveLength(1);
    expect(await store.get('k')).toMatchObject({
      status: 'done',
      response: { value: 'ran' },
      fencingToken: tokens[0],
    });
    await store.close();
  });
});
