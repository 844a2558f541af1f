import { sql } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ErrorCode } from '../../src/core/errors.js';
import { TransactionRolledBackError } from '../../src/core/rolled-back.js';
import { makeIdempotent } from '../../src/function/index.js';
import { applyPgMigrations, PgIdempotencyStore, pgTransaction } from '../../src/pg/index.js';
import { freshServerSchema, type ServerSchema } from '../support/pg.js';

// Runs only when DATABASE_URL is set (see vitest.config.ts); then an unreachable server fails it.
const url = process.env.DATABASE_URL as string;

describe('pgTransaction when PostgreSQL rolls the transaction back (40001)', () => {
  let server: ServerSchema;
  let store: PgIdempotencyStore;
  beforeAll(async () => {
    server = await freshServerSchema(url, 4);
    await applyPgMigrations(server.db, { schema: server.schema });
    await server.pool.query(
      `CREATE TABLE "${server.schema}".credits (id text NOT NULL, run integer NOT NULL)`,
    );
    store = new PgIdempotencyStore(server.db, { schema: server.schema });
  });
  afterAll(async () => server.drop());

  const credits = async (id: string) =>
    (await server.pool.query(`SELECT run FROM "${server.schema}".credits WHERE id = $1`, [id]))
      .rows;
  // Another session changes the key's row (as the lease's heartbeat does) after the handler's
  // snapshot: under SERIALIZABLE, recording the answer on that row then fails with 40001.
  const touchKeyRow = (key: string) =>
    server.pool.query(
      `UPDATE "${server.schema}".keys SET lease_until = lease_until WHERE id = $1`,
      [key],
    );

  const crediting = (conflictingRuns: number, attempts?: number) => {
    const runs: number[] = [];
    const credit = makeIdempotent(
      async (tx, message: { id: string }) => {
        runs.push(runs.length + 1);
        const run = runs.length;
        await tx.execute(
          sql`INSERT INTO ${sql.identifier(server.schema)}.credits (id, run) VALUES (${message.id}, ${run})`,
        );
        if (run <= conflictingRuns) await touchKeyRow(message.id);
        return { run };
      },
      {
        transaction: pgTransaction(store, { isolationLevel: 'serializable', attempts }),
        key: (message) => message.id,
      },
    );
    return { credit, runs };
  };

  it('runs a serialization failure on the answer’s recording again in place and commits once', async () => {
    const { credit, runs } = crediting(1);
    expect(await credit({ id: 'retried' })).toEqual({ run: 2 });
    expect(runs).toEqual([1, 2]);
    // The first attempt's write was rolled back with it; only the second one's stays.
    expect(await credits('retried')).toEqual([{ run: 2 }]);
    expect(await store.get('retried')).toMatchObject({ status: 'done' });
    expect(await credit({ id: 'retried' })).toEqual({ run: 2 });
    expect(runs).toEqual([1, 2]);
  });

  it('gives up after its attempts with TransactionRolledBackError, nothing committed, the key free', async () => {
    const { credit, runs } = crediting(Number.POSITIVE_INFINITY);
    const failure = await credit({ id: 'exhausted' }).catch((error: unknown) => error);
    expect(failure).toBeInstanceOf(TransactionRolledBackError);
    expect(failure).toMatchObject({ code: ErrorCode.requestRolledBack, attempts: 3 });
    expect(runs).toEqual([1, 2, 3]);
    expect(await credits('exhausted')).toEqual([]);
    expect(await store.get('exhausted')).toBeNull();
    // Free: the next call runs (no conflict this time).
    const { credit: again } = crediting(0);
    expect(await again({ id: 'exhausted' })).toEqual({ run: 1 });
  });

  it('runs once with attempts: 1', async () => {
    const { credit, runs } = crediting(1, 1);
    const failure = await credit({ id: 'once' }).catch((error: unknown) => error);
    expect(failure).toBeInstanceOf(TransactionRolledBackError);
    expect(runs).toEqual([1]);
    expect(await store.get('once')).toBeNull();
  });

  it('refuses attempts that are not a whole number of at least 1', () => {
    expect(() => pgTransaction(store, { attempts: 0 })).toThrow(/attempts/);
    expect(() => pgTransaction(store, { attempts: 1.5 })).toThrow(/attempts/);
  });
});
