import { sql } from 'drizzle-orm';
import { afterAll, describe, expect, it } from 'vitest';
import { makeIdempotent } from '../../src/function/index.js';
import {
  applyMysqlMigrations,
  MysqlIdempotencyStore,
  mysqlTransaction,
} from '../../src/mysql/index.js';
import { freshMysqlDatabase, type MysqlDatabase } from '../support/mysql.js';
import { until } from '../support/waiting.js';
import { crashTrial, expectAgreement, inBatches, type KeyState, TRIALS } from './crash-support.js';

// Runs only when MYSQL_URL is set (see vitest.config.ts); then an unreachable server fails it.
const url = process.env.MYSQL_URL as string;

// KEY_STATES in MySQL's words: `key` is a reserved word there, and ids are bytes.
const KEY_STATES = `
  SELECT CONVERT(k.id USING utf8mb4) AS \`key\`, k.status AS status,
         (SELECT count(*) FROM effects e WHERE e.\`key\` = k.id) AS effects
    FROM \`keys\` k WHERE k.id LIKE ?
  UNION ALL
  SELECT CONVERT(e.\`key\` USING utf8mb4), NULL, count(*) FROM effects e
   WHERE e.\`key\` LIKE ? AND NOT EXISTS (SELECT 1 FROM \`keys\` k WHERE k.id = e.\`key\`)
   GROUP BY e.\`key\``;

describe('transactional makeIdempotent on the MySQL server, killed with SIGKILL', () => {
  let database: MysqlDatabase | undefined;
  afterAll(async () => database?.drop());

  it(`keeps effect and answer in agreement after each of ${TRIALS} crashes`, async () => {
    database = await freshMysqlDatabase(url, 2);
    const { pool, db } = database;
    await applyMysqlMigrations(db);
    await pool.query('CREATE TABLE effects (`key` VARBINARY(255) NOT NULL, INDEX (`key`))');
    const states = async (pattern: string) => {
      const [rows] = await pool.query(KEY_STATES, [pattern, pattern]);
      return (rows as KeyState[]).map((s) => ({ ...s, effects: Number(s.effects) }));
    };
    const target = database.url;
    const trials = await inBatches(TRIALS, () =>
      crashTrial(
        ['mysql', target],
        (prefix) => states(`${prefix}-%`),
        (sessions) =>
          until(async () => {
            const [rows] = await pool.query(
              'SELECT count(*) AS n FROM information_schema.PROCESSLIST WHERE ID IN (?)',
              [sessions],
            );
            return Number((rows as { n: number }[])[0]?.n) === 0;
          }),
      ),
    );
    expect(trials).toHaveLength(TRIALS);
    const counts = trials.map(expectAgreement);
    expect(counts.every(({ done }) => done > 0)).toBe(true);
    // The kills did land inside transactions: their calls left a claimed key and no effect.
    expect(counts.some(({ pending }) => pending > 0)).toBe(true);

    // Each call a crash cut short runs cleanly on a retry once its lease has lapsed (an hour on).
    const store = new MysqlIdempotencyStore(db);
    const retry = makeIdempotent(
      async (tx, key: string) => {
        await tx.execute(sql`INSERT INTO effects (\`key\`) VALUES (${key})`);
        return { applied: key };
      },
      {
        transaction: mysqlTransaction(store),
        key: (key) => key,
        now: () => Date.now() / 1000 + 3600,
      },
    );
    const cut = trials.flat().filter((state) => state.status === 'pending');
    for (const { key } of cut) expect(await retry(key)).toEqual({ applied: key });
    const after = expectAgreement(await states('k\\_%'));
    expect(after.pending).toBe(0);
    expect(after.done).toBe(counts.reduce((sum, { done, pending }) => sum + done + pending, 0));
  });
});
