// The step suite on bun:sqlite. Only Bun has bun:sqlite: under Node this file only says so, and
// test/runtimes/bun-runtime.test.ts runs it under Bun (`bun --bun vitest run`).
import { sql } from 'drizzle-orm';
import { describe, it } from 'vitest';
import {
  type BunSqliteIdempotencyStore,
  bunSqliteSteps,
  openBunSqliteStore,
} from '../../src/bun-sqlite/index.js';
import { underBun } from '../support/bun-harness.js';
import { freshDbPath, tempDir } from '../support/temp.js';
import { stepsSuite } from './steps-suite.js';

if (underBun) {
  const dir = tempDir('idem-steps-bun-');
  stepsSuite('bun:sqlite', async () => {
    const path = freshDbPath(dir);
    const store = await openBunSqliteStore(path);
    store.db.run(sql`CREATE TABLE ledger (id TEXT NOT NULL)`);
    const others: BunSqliteIdempotencyStore<unknown>[] = [];
    return {
      store,
      steps: (options) => bunSqliteSteps(store, options),
      ledger: (tx, id) => tx.run(sql`INSERT INTO ledger (id) VALUES (${id})`),
      ledgerRows: async (id) =>
        Number(
          store.db.all<{ n: number }>(sql`SELECT count(*) AS n FROM ledger WHERE id = ${id}`)[0]?.n,
        ),
      stepsColumn: async (key) =>
        store.db.all<{ steps: string | null }>(sql`SELECT steps FROM keys WHERE id = ${key}`)[0]
          ?.steps ?? null,
      reopen: async (encryption) => {
        const other = await openBunSqliteStore(
          path,
          encryption === undefined ? {} : { encryption },
        );
        others.push(other);
        return { store: other, steps: (options) => bunSqliteSteps(other, options) };
      },
      close: async () => {
        for (const other of others) await other.close();
        await store.close();
      },
    };
  });
} else {
  describe('steps on bun:sqlite', () => {
    it.skip('runs under Bun only: test/runtimes/bun-runtime.test.ts runs this file with bun', () => {});
  });
}
