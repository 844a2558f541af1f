import { sql } from 'drizzle-orm';
import pg from 'pg';
import { alternate, check, median, nowMs, pairedRatio } from './support/measure.js';
import type { BenchSize, GroupResult } from './support/report.js';
import { shippedFunction, shippedPg, shippedSqlite } from './support/shipped.js';
import { benchDir, freshStoreFile } from './support/sqlite-files.js';

const { makeIdempotent } = shippedFunction;
const { openPgStore, pgTransaction } = shippedPg;
const { openSqliteStore, sqliteTransaction } = shippedSqlite;

const URL = 'postgres://postgres@127.0.0.1:5432/test';

/**
 * Calls per second of `count` awaited calls of `call`, one after another, each checked to have
 * run its effect and returned its result (1).
 */
async function callsPerSecond(count: number, call: (index: number) => Promise<unknown>) {
  const start = nowMs();
  for (let index = 0; index < count; index++) check((await call(index)) === 1, 'idempotent call');
  return count / ((nowMs() - start) / 1000);
}

/**
 * The cost of the transactional form of `makeIdempotent` against its two-commit form, for the
 * same call writing one effect row: two-commit claims the key, writes the effect (its own commit)
 * and then records the result (another commit); transactional claims the key and then commits the
 * effect and the result in one transaction. Ratio = transactional ÷ two-commit calls/s, on one
 * SQLite file and on the PostgreSQL server.
 */
export async function functionTransactional({ quick }: BenchSize): Promise<GroupResult> {
  const { dir, cleanup } = benchDir();
  const store = openSqliteStore(freshStoreFile(dir));
  store.db.run(sql`CREATE TABLE effects (key TEXT NOT NULL)`);
  const insert = store.db.$client.prepare('INSERT INTO effects (key) VALUES (?)');
  const sqliteTwoCommit = makeIdempotent(
    async (key: string) => {
      insert.run(key);
      return 1;
    },
    { store, key: (key) => key },
  );
  const sqliteOneCommit = makeIdempotent(
    // The same prepared insert as the other side: on better-sqlite3 it runs on the store's
    // connection, so inside the transaction.
    (_tx, key: string) => {
      insert.run(key);
      return 1;
    },
    { transaction: sqliteTransaction(store), key: (key) => key },
  );
  const schema = `bench_fn_${process.pid}`;
  const pool = new pg.Pool({ connectionString: URL, max: 2 });
  try {
    const sqliteCount = 500;
    const sqliteRounds = quick ? 10 : 30;
    const sqliteSides = await alternate(
      sqliteRounds,
      (r) => callsPerSecond(sqliteCount, (i) => sqliteOneCommit(`t-${r}-${i}`)),
      (r) => callsPerSecond(sqliteCount, (i) => sqliteTwoCommit(`p-${r}-${i}`)),
    );

    const sqliteEffects = store.db.$client.prepare('SELECT count(*) FROM effects').pluck().get();
    check(sqliteEffects === 2 * sqliteRounds * sqliteCount, 'one effect row per SQLite call');

    const pgStore = await openPgStore(pool, { schema });
    await pool.query(`CREATE TABLE "${schema}".effects (key text NOT NULL)`);
    const pgTwoCommit = makeIdempotent(
      async (key: string) => {
        await pool.query(`INSERT INTO "${schema}".effects (key) VALUES ($1)`, [key]);
        return 1;
      },
      { store: pgStore, key: (key) => key },
    );
    const pgOneCommit = makeIdempotent(
      async (tx, key: string) => {
        await tx.execute(sql`INSERT INTO ${sql.identifier(schema)}.effects (key) VALUES (${key})`);
        return 1;
      },
      {
        transaction: pgTransaction(pgStore),
        key: (key) => key,
      },
    );
    const pgCount = 200;
    const pgRounds = quick ? 5 : 15;
    const pgSides = await alternate(
      pgRounds,
      (r) => callsPerSecond(pgCount, (i) => pgOneCommit(`t-${r}-${i}`)),
      (r) => callsPerSecond(pgCount, (i) => pgTwoCommit(`p-${r}-${i}`)),
    );
    const pgEffects = await pool.query(`SELECT count(*)::int AS n FROM "${schema}".effects`);
    check(pgEffects.rows[0]?.n === 2 * pgRounds * pgCount, 'one effect row per PostgreSQL call');
    return {
      metrics: {
        'sqlite.function.transactional.ratio': pairedRatio(sqliteSides),
        'pg.function.transactional.ratio': pairedRatio(pgSides),
      },
      details: {
        'sqlite.function.transactional.callsPerSec': median(sqliteSides.ours),
        'sqlite.function.twoCommit.callsPerSec': median(sqliteSides.theirs),
        'pg.function.transactional.callsPerSec': median(pgSides.ours),
        'pg.function.twoCommit.callsPerSec': median(pgSides.theirs),
      },
    };
  } finally {
    store.close();
    await pool.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
    await pool.end();
    cleanup();
  }
}
