import { count, eq, sql } from 'drizzle-orm';
import { int, mysqlTable, varchar } from 'drizzle-orm/mysql-core';
import { afterAll, describe, expect, it } from 'vitest';
import {
  CallSupersededError,
  makeIdempotent,
  TransactionRolledBackError,
} from '../../src/function/index.js';
import { ER_LOCK_DEADLOCK, mysqlErrno } from '../../src/mysql/errors.js';
import {
  applyMysqlMigrations,
  keys,
  MysqlIdempotencyStore,
  mysqlKeysTable,
  mysqlTransaction,
  retryDeadlocks,
  TransactionDeadlockError,
} from '../../src/mysql/index.js';
import { freshMysqlDatabase, type MysqlDatabase } from '../support/mysql.js';
import { deferred } from '../support/waiting.js';
import {
  type Dialect,
  isUniqueViolation,
  linger,
  type Message,
  transactionalSuite,
} from './transactional-suite.js';

// Runs only when MYSQL_URL is set (see vitest.config.ts); then an unreachable server fails it.
const url = process.env.MYSQL_URL as string;

const effects = mysqlTable('effects', {
  id: varchar('id', { length: 64 }).primaryKey(),
  amount: int('amount').notNull(),
});

async function migrated(): Promise<{ database: MysqlDatabase; store: MysqlIdempotencyStore }> {
  const database = await freshMysqlDatabase(url, 4);
  await applyMysqlMigrations(database.db);
  await database.pool.query(
    'CREATE TABLE effects (id VARCHAR(64) PRIMARY KEY, amount INT NOT NULL) ENGINE=InnoDB',
  );
  return { database, store: new MysqlIdempotencyStore(database.db) };
}

// The suite's store keeps its keys in a renamed table, beside a default `keys` table that stays empty.
async function mysqlDialect(): Promise<Dialect> {
  const { database } = await migrated();
  const table = mysqlKeysTable('idem_keys');
  await applyMysqlMigrations(database.db, { table });
  const store = new MysqlIdempotencyStore(database.db, { table });
  return {
    store,
    credit: (behaviour = {}) =>
      makeIdempotent(
        async (tx, message: Message) => {
          if (behaviour.effectId !== undefined) {
            try {
              await tx.insert(effects).values({ ...message, id: behaviour.effectId });
            } catch (error) {
              if (!isUniqueViolation(error)) throw error;
              return { conflict: behaviour.effectId };
            }
          } else await tx.insert(effects).values(message);
          if (behaviour.linger) await linger();
          if (behaviour.fail) throw new Error('handler failed');
          if (behaviour.loseKey) await tx.delete(table).where(eq(table.id, message.id));
          return 'result' in behaviour ? behaviour.result : { credited: message.amount };
        },
        { transaction: mysqlTransaction(store), key: (message) => message.id },
      ),
    effects: async () => database.db.select().from(effects).orderBy(effects.id),
    defaultKeys: async () => (await database.db.select({ n: count() }).from(keys))[0]?.n,
    close: () => database.drop(),
  };
}

transactionalSuite([{ name: 'the MySQL server (mysql2)', open: mysqlDialect }]);

describe('transactional makeIdempotent on the MySQL server', () => {
  const databases: MysqlDatabase[] = [];
  afterAll(async () => {
    for (const database of databases) await database.drop();
  });
  async function open() {
    const opened = await migrated();
    databases.push(opened.database);
    return { pool: opened.database.pool, store: opened.store };
  }

  // Two calls lock the two accounts in opposite orders on their first run: a lock cycle InnoDB
  // must break by rolling one of them back.
  async function deadlocking(attempts?: number) {
    const { pool, store } = await open();
    await pool.query('CREATE TABLE accounts (id INT PRIMARY KEY, balance INT NOT NULL)');
    await pool.query('INSERT INTO accounts VALUES (1, 0), (2, 0)');
    const locked = { a: deferred(), b: deferred() };
    const runs: string[] = [];
    const transfer = makeIdempotent(
      async (tx, call: { key: string; first: 1 | 2 }) => {
        runs.push(call.key);
        const second = call.first === 1 ? 2 : 1;
        await tx.execute(sql`UPDATE accounts SET balance = balance + 1 WHERE id = ${call.first}`);
        if (runs.filter((key) => key === call.key).length === 1) {
          // First run of each call only: wait until both hold their first lock.
          (call.first === 1 ? locked.a : locked.b).resolve();
          await Promise.all([locked.a.promise, locked.b.promise]);
        }
        await tx.execute(sql`UPDATE accounts SET balance = balance + 1 WHERE id = ${second}`);
        return { moved: call.key };
      },
      { transaction: mysqlTransaction(store, { attempts }), key: (call) => call.key },
    );
    const calls = [
      { key: 'a', first: 1 as const },
      { key: 'b', first: 2 as const },
    ];
    const outcomes = await Promise.allSettled(calls.map((call) => transfer(call)));
    const balances = async () =>
      (await pool.query('SELECT id, balance FROM accounts ORDER BY id'))[0];
    return { store, transfer, calls, outcomes, runs, balances };
  }

  it('runs a deadlock victim again in place: both calls commit once', async () => {
    const { store, outcomes, runs, balances } = await deadlocking();
    expect(outcomes).toEqual([
      { status: 'fulfilled', value: { moved: 'a' } },
      { status: 'fulfilled', value: { moved: 'b' } },
    ]);
    // One of the two ran twice: its first run was the victim, rolled back whole.
    expect(runs).toHaveLength(3);
    expect(await store.get('a')).toMatchObject({ status: 'done' });
    expect(await store.get('b')).toMatchObject({ status: 'done' });
    expect(await balances()).toEqual([
      { id: 1, balance: 2 },
      { id: 2, balance: 2 },
    ]);
  });

  it('with attempts: 1, surfaces a deadlock victim as TransactionDeadlockError, releases its key, and runs again only when asked', async () => {
    const { store, transfer, calls, outcomes, runs, balances } = await deadlocking(1);
    const failed = outcomes.flatMap((outcome, i) =>
      outcome.status === 'rejected' ? [{ call: calls[i], reason: outcome.reason as unknown }] : [],
    );
    expect(failed).toHaveLength(1);
    const [victim] = failed;
    expect(victim?.reason).toBeInstanceOf(TransactionDeadlockError);
    expect(victim?.reason).toBeInstanceOf(TransactionRolledBackError);
    expect(mysqlErrno(victim?.reason)).toBe(ER_LOCK_DEADLOCK);
    const victimKey = victim?.call?.key as string;
    // Nothing of the victim's was committed and its key is free again; it ran once, not twice.
    expect(await store.get(victimKey)).toBeNull();
    expect(runs.filter((key) => key === victimKey)).toHaveLength(1);
    expect(await balances()).toEqual([
      { id: 1, balance: 1 },
      { id: 2, balance: 1 },
    ]);
    // Asked to, retryDeadlocks runs the call again from the start.
    const call = calls.find((c) => c.key === victimKey);
    if (call === undefined) throw new Error('the victim is one of the calls');
    expect(await retryDeadlocks(() => transfer(call))).toEqual({ moved: victimKey });
    expect(await store.get(victimKey)).toMatchObject({ status: 'done' });
    expect(await balances()).toEqual([
      { id: 1, balance: 2 },
      { id: 2, balance: 2 },
    ]);
  });

  it('rolls back a stalled call’s open transaction once its key was taken over', async () => {
    const { pool, store } = await open();
    await pool.query('CREATE TABLE runs (run INT NOT NULL)');
    let clock = 1000;
    let runs = 0;
    const wrote = deferred();
    const gate = deferred();
    const job = makeIdempotent(
      async (tx, _id: string) => {
        runs += 1;
        const run = runs;
        await tx.execute(sql`INSERT INTO runs (run) VALUES (${run})`);
        if (run === 1) {
          // The first call stalls with its effect written and its transaction open.
          wrote.resolve();
          await gate.promise;
        }
        return run;
      },
      {
        transaction: mysqlTransaction(store),
        key: (id) => id,
        leaseSeconds: 10,
        now: () => clock,
      },
    );
    const stalled = job('k').catch((e: unknown) => e);
    await wrote.promise;
    const first = (await store.get('k'))?.fencingToken as number;
    clock = 1020;
    expect(await job('k')).toBe(2);
    gate.resolve();
    expect(await stalled).toBeInstanceOf(CallSupersededError);
    const [rows] = await pool.query('SELECT run FROM runs');
    expect(rows).toEqual([{ run: 2 }]);
    const record = await store.get('k');
    expect(record).toMatchObject({ status: 'done', response: { value: 2 } });
    expect(record?.fencingToken).toBeGreaterThan(first);
  });
});
