import Database from 'better-sqlite3';
import { readMigrationFiles } from 'drizzle-orm/migrator';
import { describe, expect, it } from 'vitest';
import { openLibsqlStore } from '../../src/libsql/index.js';
import { fixture } from '../support/child.js';
import { fileUrl } from '../support/libsql-harness.js';
import { runContenders } from '../support/rel-processes.js';
import { freshDbPath, tempDir } from '../support/temp.js';

// Every committed SQLite migration, each recorded once in the library's journal.
const MIGRATIONS = readMigrationFiles({
  migrationsFolder: new URL('../../drizzle/sqlite', import.meta.url).pathname,
}).length;

const dir = tempDir('idem-libsql-race-');
const PROCESSES = 4;

interface ContendReport {
  owner: string;
  won: string[];
  errors: string[];
}

async function contend(
  url: string,
  keyCount: number,
  mode: 'open-first' | 'open-after-go',
): Promise<ContendReport[]> {
  // The children report errors on open as well as on reserve.
  return runContenders<ContendReport>(
    Array.from({ length: PROCESSES }, (_, i) => ({
      script: fixture('libsql-contend.ts'),
      args: [url, String(keyCount), String(i + 1), mode],
    })),
    dir,
  );
}

async function expectOneWinnerEach(url: string, keyCount: number, reports: ContendReport[]) {
  const won = reports.flatMap((report) => report.won);
  expect(won).toHaveLength(keyCount);
  expect(new Set(won).size).toBe(keyCount);
  const store = await openLibsqlStore(url);
  expect(await store.counts()).toEqual({ pending: keyCount, done: 0 });
  // Each row belongs to the process that was told it won it.
  for (const report of reports) {
    for (const key of report.won) expect((await store.get(key))?.fingerprint).toBe(report.owner);
  }
  await store.close();
}

describe('libSQL store across processes', () => {
  it('gives each of 300 keys exactly one winner among 4 processes reserving at once', async () => {
    const path = freshDbPath(dir);
    const url = fileUrl(path);
    await (await openLibsqlStore(url)).close();
    const reports = await contend(url, 300, 'open-first');
    await expectOneWinnerEach(url, 300, reports);
  }, 120_000);

  it('opens one fresh file from 4 processes at once, migrating it exactly once', async () => {
    const path = freshDbPath(dir);
    const url = fileUrl(path);
    const reports = await contend(url, 20, 'open-after-go');
    await expectOneWinnerEach(url, 20, reports);
    const client = new Database(path, { readonly: true });
    try {
      expect(client.pragma('journal_mode', { simple: true })).toBe('wal');
      const applied = client
        .prepare('SELECT count(*) FROM __idempotency_migrations')
        .pluck()
        .get() as number;
      expect(applied).toBe(MIGRATIONS);
    } finally {
      client.close();
    }
  }, 120_000);

  it('gives each of 50 lapsed keys to exactly one of 4 processes taking them over at once', async () => {
    const url = fileUrl(freshDbPath(dir));
    const store = await openLibsqlStore(url);
    // Leased until 30; the children take over at now = 100.
    const claimed: number[] = [];
    for (let i = 0; i < 50; i++) {
      const got = await store.acquire(`key-${i}`, 'd', {
        expires: 1_000,
        now: 0,
        leaseSeconds: 30,
      });
      claimed.push(got.status === 'acquired' ? got.fencingToken : Infinity);
    }
    const reports = await runContenders<{ won: string[]; errors: string[] }>(
      Array.from({ length: PROCESSES }, () => ({
        script: fixture('libsql-takeover.ts'),
        args: [url, '50'],
      })),
      dir,
    );
    const won = reports.flatMap((report) => report.won);
    expect(won).toHaveLength(50);
    expect(new Set(won).size).toBe(50);
    for (let i = 0; i < 50; i++) {
      const row = await store.get(`key-${i}`);
      expect(row).toMatchObject({ leaseUntil: 130 });
      expect(row?.fencingToken).toBeGreaterThan(claimed[i] ?? Infinity);
    }
    await store.close();
  }, 120_000);
});
