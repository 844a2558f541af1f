// The steps migration on databases made by the previous release (0.1.0, git tag v0.1.0): the
// column arrives, the old rows keep everything and carry no steps, and a stepped call records and
// resumes on the upgraded table.
import { copyFileSync } from 'node:fs';
import Database from 'better-sqlite3';
import { sql } from 'drizzle-orm';
import { describe, expect, it } from 'vitest';
import { makeIdempotent, type Step, type StepLog } from '../../src/function/index.js';
import type { LeasedIdempotencyStore } from '../../src/index.js';
import { queryRows } from '../../src/pg/client.js';
import { quoteIdentifier } from '../../src/pg/identifier.js';
import { applyPgMigrations, PgIdempotencyStore, pgSteps } from '../../src/pg/index.js';
import { openSqliteStore, sqliteSteps } from '../../src/sqlite/index.js';
import { sharedPglite, uniqueName } from '../support/pg.js';
import { loadV010Schema } from '../support/pg-journal-suite.js';
import { freshDbPath, tempDir } from '../support/temp.js';

const dir = tempDir('idem-steps-upgrade-');
const SECRET = 'the upgrade test secret';

// A call that fails after its first step, then a retry that goes on from it.
async function resumes<TX>(log: StepLog<TX>, store: LeasedIdempotencyStore<unknown>) {
  let clock = 2000;
  const runs: string[] = [];
  let fail = true;
  const call = makeIdempotent(
    async (step: Step<TX>, id: string) => {
      await step('one', () => runs.push('one'));
      if (fail) throw new Error('after one');
      await step('two', () => runs.push('two'));
      return id;
    },
    { steps: log, key: (id) => id, now: () => clock },
  );
  await expect(call('upgraded')).rejects.toThrow('after one');
  expect(await store.get('upgraded')).toMatchObject({ status: 'pending' });
  fail = false;
  clock += 1;
  expect(await call('upgraded')).toBe('upgraded');
  expect(runs).toEqual(['one', 'two']);
}

describe('the steps migration on a database made by 0.1.0', () => {
  it('SQLite: the column arrives, old rows carry no steps, a stepped call resumes', async () => {
    const path = freshDbPath(dir);
    copyFileSync(new URL('../fixtures/v0.1.0/store.db', import.meta.url), path);
    const before = new Database(path);
    const rows = before.prepare('SELECT * FROM keys ORDER BY id').all();
    before.close();
    const store = openSqliteStore<{ receipt: number }>(path);
    expect(store.fetch('done-1', 1000)).toEqual({ receipt: 1 });
    await resumes(sqliteSteps(store, { secret: SECRET }), store);
    store.close();
    const after = new Database(path, { readonly: true });
    const old = after
      .prepare(
        "SELECT id, fingerprint, status, response, expires, steps FROM keys WHERE id <> 'upgraded' ORDER BY id",
      )
      .all();
    expect(old).toEqual(rows.map((row) => ({ ...(row as object), steps: null })));
    after.close();
  });

  it('PostgreSQL: the column arrives, old rows carry no steps, a stepped call resumes', async () => {
    const db = await sharedPglite()();
    const schema = uniqueName('up');
    await db.execute(sql.raw(`CREATE SCHEMA ${quoteIdentifier(schema)}`));
    await loadV010Schema(db, schema);
    await applyPgMigrations(db, { schema });
    const store = new PgIdempotencyStore<{ receipt: number }>(db, { schema });
    expect(await store.fetch('done-1', 1000)).toEqual({ receipt: 1 });
    await resumes(pgSteps(store, { secret: SECRET }), store);
    const old = await queryRows<{ id: string; steps: string | null }>(
      db,
      sql.raw(`SELECT id, steps FROM ${quoteIdentifier(schema)}.keys WHERE id <> 'upgraded'`),
    );
    expect(old.length).toBeGreaterThan(0);
    expect(old.every((row) => row.steps === null)).toBe(true);
    await store.close();
  });
});
