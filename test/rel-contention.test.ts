import { describe, expect, it } from 'vitest';
import { openSqliteStore } from '../src/sqlite/index.js';
import { fixture } from './support/child.js';
import { runTogether } from './support/rel-processes.js';
import { scaled } from './support/stress.js';
import { freshDbPath, tempDir } from './support/temp.js';

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
  const trials = scaled(3, 20);
  it(`${PROCESSES} processes x ${KEYS * ROUNDS} reserves over the same ${KEYS} keys: one winner per key (${trials} trial(s))`, {
    timeout: scaled(120_000, 900_000),
  }, async () => {
    for (let trial = 0; trial < trials; trial++) {
      // A fresh file each trial: the processes also race to create and migrate it.
      const path = freshDbPath(dir);
      const results = await runTogether(
        Array.from({ length: PROCESSES }, (_, i) => ({
          script: fixture('rel-contend.ts'),
          args: [path, String(KEYS), String(ROUNDS), String(trial * 100 + i + 1)],
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
  });
});
