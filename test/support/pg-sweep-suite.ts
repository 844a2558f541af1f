import { sql } from 'drizzle-orm';
import { describe, expect, it } from 'vitest';
import { sweep } from '../../src/index.js';
import { quoteIdentifier } from '../../src/pg/identifier.js';
import { type AnyPgDatabase, PgIdempotencyStore } from '../../src/pg/index.js';
import { type Backlog, SWEEP_NOW } from './backlog.js';
import { uniqueName } from './pg.js';
import { seedPgBacklog, tallyPg } from './pg-backlog.js';

/**
 * The library's `sweep()` on a PostgreSQL store: what the SQLite sweep tests prove about counts
 * and kept rows, on the dialect whose batches are `FOR UPDATE SKIP LOCKED` statements. Each test
 * works in its own schema of the database `shared` gives, dropped at its end.
 *
 * @param name - the database the suite runs on, for the test names
 * @param shared - the file's one database, created on first use
 */
export function describePgSweep(name: string, shared: () => Promise<AnyPgDatabase>): void {
  async function withBacklog(
    backlog: Backlog,
    use: (store: PgIdempotencyStore, db: AnyPgDatabase, schema: string) => Promise<void>,
  ): Promise<void> {
    const db = await shared();
    const schema = uniqueName('w');
    await seedPgBacklog(db, schema, backlog);
    const store = new PgIdempotencyStore(db, { schema });
    try {
      await use(store, db, schema);
    } finally {
      await store.close();
      await db.execute(sql.raw(`DROP SCHEMA ${quoteIdentifier(schema)} CASCADE`));
    }
  }

  describe(`sweep on ${name}`, () => {
    it('deletes every expired answer in batches, keeping pending and live rows', async () => {
      const kept = { live: 500, pending: 1_000, stalePending: 500 };
      await withBacklog({ expired: 2_000, ...kept }, async (store, db, schema) => {
        const batches: number[] = [];
        const result = await sweep(store, {
          now: SWEEP_NOW,
          batchSize: 200,
          onBatch: ({ batchDeleted }) => {
            batches.push(batchDeleted);
          },
        });
        expect(result).toMatchObject({
          deleted: 2_000,
          batches: 10,
          remaining: 0,
          backlog: 2_000,
          stoppedBy: 'drained',
        });
        expect(batches).toEqual(Array(10).fill(200));
        expect(await tallyPg(db, schema)).toEqual({ expired: 0, ...kept });
      });
    });

    it('stops on maxBatches or an aborted signal with the counts of what is gone', async () => {
      await withBacklog({ expired: 100, stalePending: 7 }, async (store, db, schema) => {
        const capped = await sweep(store, { now: SWEEP_NOW, batchSize: 15, maxBatches: 2 });
        expect(capped).toMatchObject({ deleted: 30, batches: 2, remaining: 70 });
        const controller = new AbortController();
        const stopped = await sweep(store, {
          now: SWEEP_NOW,
          batchSize: 20,
          signal: controller.signal,
          onBatch: ({ batches }) => {
            if (batches === 3) controller.abort();
          },
        });
        expect(stopped).toMatchObject({
          deleted: 60,
          batches: 3,
          remaining: 10,
          stoppedBy: 'signal',
        });
        const dry = await sweep(store, { now: SWEEP_NOW, dryRun: true });
        expect(dry).toMatchObject({ deleted: 0, remaining: 10, wouldDelete: 10 });
        expect(await tallyPg(db, schema)).toEqual({
          expired: 10,
          live: 0,
          pending: 0,
          stalePending: 7,
        });
        expect(await sweep(store, { now: SWEEP_NOW, batchSize: 10 })).toMatchObject({
          deleted: 10,
          batches: 1,
          remaining: 0,
          stoppedBy: 'drained',
        });
      });
    });
  });
}
