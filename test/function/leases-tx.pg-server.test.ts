import { sql } from 'drizzle-orm';
import { afterAll, describe, expect, it } from 'vitest';
import { CallSupersededError, makeIdempotent } from '../../src/function/index.js';
import { applyPgMigrations, PgIdempotencyStore, pgTransaction } from '../../src/pg/index.js';
import { freshServerSchema, type ServerSchema } from '../support/pg.js';
import { deferred } from '../support/waiting.js';

// Runs only when DATABASE_URL is set (see vitest.config.ts); then an unreachable server fails it.
const url = process.env.DATABASE_URL as string;

describe('transactional makeIdempotent with leases on the PostgreSQL server', () => {
  let server: ServerSchema | undefined;
  afterAll(async () => server?.drop());

  it('rolls back a stalled call’s open transaction once its key was taken over', async () => {
    server = await freshServerSchema(url, 4);
    const { schema, pool, db } = server;
    await applyPgMigrations(db, { schema });
    await pool.query(`CREATE TABLE "${schema}".effects (run integer NOT NULL)`);
    const store = new PgIdempotencyStore(db, { schema });
    let clock = 1000;
    let runs = 0;
    const wrote = deferred();
    const gate = deferred();
    const job = makeIdempotent(
      async (tx, _id: string) => {
        runs += 1;
        const run = runs;
        await tx.execute(sql`INSERT INTO ${sql.identifier(schema)}.effects (run) VALUES (${run})`);
        if (run === 1) {
          // The first call stalls with its effect written and its transaction open.
          wrote.resolve();
          await gate.promise;
        }
        return run;
      },
      {
        transaction: pgTransaction(store),
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
    const { rows } = await pool.query(`SELECT run FROM "${schema}".effects`);
    expect(rows).toEqual([{ run: 2 }]);
    const record = await store.get('k');
    expect(record).toMatchObject({ status: 'done', response: { value: 2 } });
    expect(record?.fencingToken).toBeGreaterThan(first);
  });
});
