import { describe, expect, it } from 'vitest';
import { openSqliteStore } from '../../src/sqlite/index.js';
import { fixture } from '../support/child.js';
import { runTogether } from '../support/rel-processes.js';
import { readRows } from '../support/sqlite-harness.js';
import { scaled } from '../support/stress.js';
import { freshDbPath, tempDir } from '../support/temp.js';

const dir = tempDir();
const WRITERS = 3;
const POOL = 40;

interface WriterReport {
  reservations: { key: string; token: string; end: 'pending' | 'done' | 'released' }[];
  lost: string[];
  errors: string[];
}

interface SweeperReport {
  purged: string[];
  swept: number;
  calls: number;
  unordered: string[][];
  errors: string[];
}

const countBy = (values: string[]) => {
  const counts = new Map<string, number>();
  for (const value of values) counts.set(value, (counts.get(value) ?? 0) + 1);
  return counts;
};

describe('purge and sweep racing writers on one SQLite file', () => {
  const trials = scaled(2, 10);
  it(`never deletes a pending row, and deletes every id it reports (${trials} trial(s))`, {
    timeout: scaled(120_000, 900_000),
  }, async () => {
    for (let trial = 0; trial < trials; trial++) {
      const path = freshDbPath(dir);
      openSqliteStore(path).close();
      const results = await runTogether(
        [
          { script: fixture('rel-sweeper.ts'), args: [path, String(WRITERS), String(trial + 1)] },
          ...Array.from({ length: WRITERS }, (_, i) => ({
            script: fixture('rel-writer.ts'),
            args: [path, String(POOL), String(scaled(4000, 20_000)), String(trial * 10 + i + 7)],
          })),
        ],
        dir,
      );
      for (const result of results) {
        expect(result.stderr).toBe('');
        expect(result.code).toBe(0);
      }
      const [sweeper, ...writers] = results.map((result) => JSON.parse(result.stdout)) as [
        SweeperReport,
        ...WriterReport[],
      ];
      expect(sweeper.errors).toEqual([]);
      expect(sweeper.unordered).toEqual([]);
      for (const writer of writers) {
        expect(writer.errors).toEqual([]);
        // A writer's finish or release of its own reservation fails only if the pending row
        // was deleted (or changed) by someone else: the sweeper.
        expect(writer.lost).toEqual([]);
      }

      const reservations = writers.flatMap((writer) => writer.reservations);
      const rows = new Map(readRows(path).map((row) => [`${row.id} ${row.fingerprint}`, row]));
      const goneDone: string[] = [];
      for (const { key, token, end } of reservations) {
        const row = rows.get(`${key} ${token}`);
        rows.delete(`${key} ${token}`);
        if (end === 'pending')
          expect(row, `pending ${key} ${token}`).toMatchObject({
            status: 'pending',
            response: null,
          });
        else if (end === 'released') expect(row).toBeUndefined();
        else if (row === undefined) goneDone.push(key);
        else expect(JSON.parse(row.response ?? 'null')).toMatchObject({ token });
      }
      // No row that no writer reserved.
      expect([...rows.keys()]).toEqual([]);

      // Everything reported deleted was deleted, and nothing else disappeared.
      expect(sweeper.purged.length + sweeper.swept).toBe(goneDone.length);
      const gone = countBy(goneDone);
      for (const [key, times] of countBy(sweeper.purged)) {
        expect(times, key).toBeLessThanOrEqual(gone.get(key) ?? 0);
      }
      // The race really happened: answers were purged and their keys reserved again.
      expect(sweeper.purged.length).toBeGreaterThan(0);
      expect(sweeper.swept).toBeGreaterThan(0);
      expect(Math.max(...countBy(reservations.map((r) => r.key)).values())).toBeGreaterThan(1);
    }
  });
});
