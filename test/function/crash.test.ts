import { sql } from 'drizzle-orm';
import { describe, expect, it } from 'vitest';
import { makeIdempotent } from '../../src/function/index.js';
import { libsqlTransaction, openLibsqlStore } from '../../src/libsql/index.js';
import { openSqliteStore, sqliteTransaction } from '../../src/sqlite/index.js';
import { fileUrl } from '../support/libsql-harness.js';
import { freshDbPath, tempDir } from '../support/temp.js';
import {
  crashTrial,
  expectAgreement,
  inBatches,
  KEY_STATES,
  type KeyState,
  TRIALS,
} from './crash-support.js';

const dir = tempDir('idem-crash-');

describe('transactional makeIdempotent on SQLite, killed with SIGKILL', () => {
  it(`keeps effect and answer in agreement after each of ${TRIALS} crashes`, async () => {
    const path = freshDbPath(dir);
    const store = openSqliteStore(path);
    store.db.run(sql`CREATE TABLE effects (key TEXT NOT NULL)`);
    const query = store.db.$client.prepare(KEY_STATES('keys', 'effects'));
    const trials = await inBatches(TRIALS, () =>
      crashTrial(['sqlite', path], async (prefix) =>
        (query.all({ prefix: `${prefix}-%` }) as KeyState[]).map((s) => ({
          ...s,
          effects: Number(s.effects),
        })),
      ),
    );
    expect(trials).toHaveLength(TRIALS);
    const counts = trials.map(expectAgreement);
    expect(counts.every(({ done }) => done > 0)).toBe(true);
    // The kills did land inside transactions: their calls left a claimed key and no effect.
    expect(counts.some(({ pending }) => pending > 0)).toBe(true);

    // Each call a crash cut short runs cleanly on a retry once its lease has lapsed (an hour on).
    const retry = makeIdempotent(
      (tx, key: string) => {
        tx.run(sql`INSERT INTO effects (key) VALUES (${key})`);
        return { applied: key };
      },
      {
        transaction: sqliteTransaction(store),
        key: (key) => key,
        now: () => Date.now() / 1000 + 3600,
      },
    );
    const cut = trials.flat().filter((state) => state.status === 'pending');
    for (const { key } of cut) expect(await retry(key)).toEqual({ applied: key });
    const after = expectAgreement(
      (query.all({ prefix: 'k_%' }) as KeyState[]).map((s) => ({
        ...s,
        effects: Number(s.effects),
      })),
    );
    expect(after.pending).toBe(0);
    expect(after.done).toBe(counts.reduce((sum, { done, pending }) => sum + done + pending, 0));
    store.close();
  });
});

describe('transactional makeIdempotent on libSQL, killed with SIGKILL', () => {
  it(`keeps effect and answer in agreement after each of ${TRIALS} crashes`, async () => {
    const path = freshDbPath(dir);
    const store = await openLibsqlStore(fileUrl(path));
    await store.db.run(sql`CREATE TABLE effects (key TEXT NOT NULL)`);
    const states = async (prefix: string) =>
      (
        await store.db.$client.execute({
          sql: KEY_STATES('keys', 'effects'),
          args: { prefix },
        })
      ).rows.map((row) => ({
        key: String(row.key),
        status: row.status === null ? null : String(row.status),
        effects: Number(row.effects),
      }));
    const trials = await inBatches(TRIALS, () =>
      crashTrial(['libsql', path], (prefix) => states(`${prefix}-%`)),
    );
    expect(trials).toHaveLength(TRIALS);
    const counts = trials.map(expectAgreement);
    expect(counts.every(({ done }) => done > 0)).toBe(true);
    // The kills did land inside transactions: their calls left a claimed key and no effect.
    expect(counts.some(({ pending }) => pending > 0)).toBe(true);

    // Each call a crash cut short runs cleanly on a retry once its lease has lapsed (an hour on).
    const retry = makeIdempotent(
      async (tx, key: string) => {
        await tx.run(sql`INSERT INTO effects (key) VALUES (${key})`);
        return { applied: key };
      },
      {
        transaction: libsqlTransaction(store),
        key: (key) => key,
        now: () => Date.now() / 1000 + 3600,
      },
    );
    const cut = trials.flat().filter((state) => state.status === 'pending');
    for (const { key } of cut) expect(await retry(key)).toEqual({ applied: key });
    const after = expectAgreement(await states('k_%'));
    expect(after.pending).toBe(0);
    expect(after.done).toBe(counts.reduce((sum, { done, pending }) => sum + done + pending, 0));
    await store.close();
  });
});
