import { describe, expect, it } from 'vitest';
import { openSqliteStore } from '../../src/sqlite/index.js';
import { fixture } from '../support/child.js';
import { runTogether } from '../support/rel-processes.js';
import { scaled } from '../support/stress.js';
import { freshDbPath, tempDir } from '../support/temp.js';

const dir = tempDir();
const PROCESSES = 4;
const KEYS = 1000;
const ROUNDS = 5;

interface ContendReport {
  owner: string;
  calls: number;
  won: string[];
  errors: string[];
}

describe('multi-process contention on one SQLite file', () => {
  // Long-lived stores, then stores closed and reopened often: connections coming and
  // going make SQLite checkpoint, delete and recover the WAL while the others write.
  it.each([
    ['long-lived stores', 0, scaled(3, 20)],
    // Under stress, a new connection for every reserve, as the seed-shaped functions do.
    [`stores reopened every ${scaled(25, 1)} reserve(s)`, scaled(25, 1), scaled(1, 5)],
  ])(
    `${PROCESSES} processes x ${KEYS * ROUNDS} reserves over the same ${KEYS} keys, %s: one winner per key (reopen %i, %i trials)`,
    {
      timeout: scaled(120_000, 900_000),
    },
    async (_, reopenEvery, trials) => {
      for (let trial = 0; trial < trials; trial++) {
        // A fresh file each trial: the processes also race to create and migrate it.
        const path = freshDbPath(dir);
        const results = await runTogether(
          Array.from({ length: PROCESSES }, (_, i) => ({
            script: fixture('rel-contend.ts'),
            args: [
              path,
              String(KEYS),
              String(ROUNDS),
              String(trial * 100 + i + 1),
              String(reopenEvery),
            ],
          })),
          dir,
        );
        const reports = results.map((result) => {
          expect(result.stderr).toBe('');
          expect(result.code).toBe(0);
          return JSON.parse(result.stdout) as ContendReport;
        });
        // No SQLITE_BUSY (nor anything else) ever reached a caller.
        expect(reports.flatMap((report) => report.errors)).toEqual([]);
        for (const report of reports) expect(report.calls).toBe(KEYS * ROUNDS);
        const won = reports.flatMap((report) => report.won);
        expect(won).toHaveLength(KEYS);
        expect(new Set(won).size).toBe(KEYS);

        const store = openSqliteStore(path);
        expect(store.counts()).toEqual({ pending: KEYS, done: 0 });
        // Each row belongs to the process that was told it won it.
        for (const report of reports) {
          for (const key of report.won) expect(store.get(key)?.fingerprint).toBe(report.owner);
        }
        store.close();
      }
    },
  );
});
