import { sql } from 'drizzle-orm';
import { afterAll, describe, expect, it } from 'vitest';
import { makeIdempotent } from '../../src/function/index.js';
import { applyPgMigrations, PgIdempotencyStore, pgTransaction } from '../../src/pg/index.js';
import { freshServerSchema, type ServerSchema } from '../support/pg.js';
import { until } from '../support/waiting.js';
import {
  crashTrial,
  expectAgreement,
  inBatches,
  KEY_STATES,
  type KeyState,
  TRIALS,
} from './crash-support.js';

// Runs only when DATABASE_URL is set (see vitest.config.ts); then an unreachable server fails it.
const url = process.env.DATABASE_URL as string;

describe('transactional makeIdempotent on the PostgreSQL server, killed with SIGKILL', () => {
  let server: ServerSchema | undefined;
  afterAll(async () => server?.drop());

  it(`keeps effect and answer in agreement after each of ${TRIALS} crashes`, async () => {
    server = await freshServerSchema(url, 2);
    const { schema, pool, db } = server;
    await applyPgMigrations(db, { schema });
    await pool.query(`CREATE TABLE "${schema}".effects (key text NOT NULL)`);
    const text = KEY_STATES(`"${schema}".keys`, `"${schema}".effects`).replaceAll('$prefix', '$1');
    const trials = await inBatches(TRIALS, () =>
      crashTrial(
        ['pg', url, schema],
        async (prefix) => {
          const { rows } = await pool.query<KeyState>(text, [`${prefix}-%`]);
          return rows.map((s) => ({ ...s, effects: Number(s.effects) }));
        },
        (sessions) =>
          until(async () => {
            const { rows } = await pool.query<{ n: number }>(
              'SELECT count(*)::int AS n FROM pg_stat_activity WHERE pid = ANY($1)',
              [sessions],
            );
            return rows[0]?.n === 0;
          }),
      ),
    );
    expect(trials).toHaveLength(TRIALS);
    const counts = trials.map(expectAgreement);
    expect(counts.every(({ done }) => done > 0)).toBe(true);
    // The kills did land inside transactions: their calls left a claimed key and no effect.
    expect(counts.some(({ pending }) => pending > 0)).toBe(true);

    // Each call a crash cut short runs cleanly on a retry once its lease has lapsed (an hour on).
    const store = new PgIdempotencyStore(db, { schema });
    const retry = makeIdempotent(
      async (tx, key: string) => {
        await tx.execute(sql`INSERT INTO ${sql.identifier(schema)}.effects (key) VALUES (${key})`);
        return { applied: key };
      },
      {
        transaction: pgTransaction(store),
        key: (key) => key,
        now: () => Date.now() / 1000 + 3600,
      },
    );
    const cut = trials.flat().filter((state) => state.status === 'pending');
    for (const { key } of cut) expect(await retry(key)).toEqual({ applied: key });
    const { rows } = await pool.query<KeyState>(text, ['k_%']);
    const after = expectAgreement(rows.map((s) => ({ ...s, effects: Number(s.effects) })));
    expect(after.pending).toBe(0);
    expect(after.done).toBe(counts.reduce((sum, { done, pending }) => sum + done + pending, 0));
  });
});
