import { copyFileSync, existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { beforeAll, describe, expect, it } from 'vitest';
import { openSqliteStore } from '../../src/sqlite/index.js';
import {
  crashDigest,
  crashKey,
  crashResponse,
  sweepRowExpires,
  sweepRowKind,
  writeCrashTemplate,
} from '../fixtures/rel-crash-data.js';
import { fixture, spawnTs } from '../support/child.js';
import { readRows } from '../support/sqlite-harness.js';
import { scaled } from '../support/stress.js';
import { freshDbPath, tempDir } from '../support/temp.js';
import { until } from '../support/waiting.js';

const dir = tempDir();
const FINISH_ROWS = 20_000;
const SWEEP_ROWS = 20_000;
const TRIALS = scaled(12, 60);
const templates = {
  finish: join(dir, 'finish-template.db'),
  sweep: join(dir, 'sweep-template.db'),
};

beforeAll(() => {
  writeCrashTemplate(templates.finish, 'finish', FINISH_ROWS);
  writeCrashTemplate(templates.sweep, 'sweep', SWEEP_ROWS);
});

/**
 * Copies a template, runs the crash fixture on it and kills it with SIGKILL at a random moment
 * once it has started writing. Returns the copy's path and the lines the child reported.
 */
async function crashOnce(mode: 'finish' | 'sweep', rows: number, trial: number) {
  const path = freshDbPath(dir);
  copyFileSync(templates[mode], path);
  const synchronous = trial % 2 === 0 ? 'NORMAL' : 'FULL';
  const log = `${path}.log`;
  const run = spawnTs(fixture('rel-crash.ts'), [path, mode, String(rows), synchronous, log]);
  const report = () => (existsSync(log) ? readFileSync(log, 'utf8') : '');
  await until(() => report().startsWith('go\n') || run.child.exitCode !== null);
  // Up to a few hundred milliseconds into the burst: mid-commit, mid-checkpoint, between.
  await new Promise((resolve) => setTimeout(resolve, Math.random() * 300));
  run.child.kill('SIGKILL');
  const result = await run.result;
  expect(result.stderr).toBe('');
  const lines = report()
    .split('\n')
    .filter((line) => line !== '' && line !== 'go');
  return { path, lines, killed: result.signal === 'SIGKILL' };
}

/** Checks the file after a crash, before the store opens it: integrity, and the WAL replayed. */
function checkIntegrity(path: string): void {
  // kill -9 leaves the WAL behind; opening recovers it.
  expect(existsSync(`${path}-wal`)).toBe(true);
  const client = new Database(path);
  try {
    expect(client.pragma('integrity_check', { simple: true })).toBe('ok');
    expect(client.pragma('journal_mode', { simple: true })).toBe('wal');
  } finally {
    client.close();
  }
}

describe('crash safety: kill -9 mid-write, then reopen', () => {
  it(`a burst of finish: every reported commit kept, no row lost or torn (${TRIALS} trials)`, {
    timeout: scaled(120_000, 900_000),
  }, async () => {
    let killed = 0;
    for (let trial = 0; trial < TRIALS; trial++) {
      const { path, lines, killed: wasKilled } = await crashOnce('finish', FINISH_ROWS, trial);
      if (wasKilled) killed++;
      const reported = lines.filter((line) => line.startsWith('f ')).length;
      checkIntegrity(path);
      const store = openSqliteStore(path);
      store.close();

      const rows = readRows(path);
      expect(rows).toHaveLength(FINISH_ROWS);
      // Finishes commit in id order: the done rows are a prefix, at least every reported one,
      // and at most one more (committed, killed before it could say so).
      const doneCount = rows.filter((row) => row.status === 'done').length;
      expect(doneCount).toBeGreaterThanOrEqual(reported);
      expect(doneCount).toBeLessThanOrEqual(reported + 1);
      // One comparison per row, collected: an expect per row would dominate the run time.
      const wrong = rows.filter((row, i) => {
        const expected =
          i < doneCount
            ? { status: 'done', response: JSON.stringify(crashResponse(i)) }
            : { status: 'pending', response: null };
        return (
          row.id !== crashKey(i) ||
          row.fingerprint !== crashDigest(i) ||
          row.expires !== 100 ||
          row.status !== expected.status ||
          row.response !== expected.response
        );
      });
      expect(wrong).toEqual([]);
    }
    // Most trials must really have been killed mid-burst, or this test proves nothing.
    expect(killed).toBeGreaterThanOrEqual(TRIALS - 1);
  });

  it(`sweeps and purges: no pending or live row lost, expired ones whole or gone (${TRIALS} trials)`, {
    timeout: scaled(120_000, 900_000),
  }, async () => {
    let killed = 0;
    for (let trial = 0; trial < TRIALS; trial++) {
      const { path, lines, killed: wasKilled } = await crashOnce('sweep', SWEEP_ROWS, trial);
      if (wasKilled) killed++;
      const reported = lines
        .filter((line) => line.startsWith('d '))
        .reduce((sum, line) => sum + Number(line.slice(2)), 0);
      checkIntegrity(path);
      openSqliteStore(path).close();

      const rows = new Map(readRows(path).map((row) => [row.id, row]));
      let expiredTotal = 0;
      let expiredLeft = 0;
      const wrong: string[] = [];
      for (let i = 0; i < SWEEP_ROWS; i++) {
        const kind = sweepRowKind(i);
        const row = rows.get(crashKey(i));
        if (kind === 'expired') expiredTotal++;
        if (kind === 'expired' && row === undefined) continue;
        if (kind === 'expired') expiredLeft++;
        // A surviving row is exactly as seeded: a pending row still pending, an answer whole.
        const intact =
          row !== undefined &&
          row.fingerprint === crashDigest(i) &&
          row.expires === sweepRowExpires(i) &&
          (kind === 'pending'
            ? row.status === 'pending' && row.response === null
            : row.status === 'done' && row.response === JSON.stringify(crashResponse(i)));
        if (!intact) wrong.push(`${kind} ${crashKey(i)}: ${JSON.stringify(row)}`);
      }
      expect(wrong).toEqual([]);
      // Every reported deletion is durable; at most one batch more committed unreported.
      const deleted = expiredTotal - expiredLeft;
      expect(deleted).toBeGreaterThanOrEqual(reported);
      expect(deleted).toBeLessThanOrEqual(reported + 100);
    }
    expect(killed).toBeGreaterThanOrEqual(TRIALS - 1);
  });
});
