import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { SWEEP_NOW, seedBacklog, tally } from '../support/backlog.js';
import { idem, jsonLine } from '../support/cli.js';
import { readRows } from '../support/sqlite-harness.js';
import { freshDbPath, tempDir } from '../support/temp.js';

const dir = tempDir('idem-cli-');
const cwd = tempDir('idem-cwd-');
const NOW = ['--now', String(SWEEP_NOW)];

function seeded(backlog: Parameters<typeof seedBacklog>[1]): string {
  const path = freshDbPath(dir);
  seedBacklog(path, backlog);
  return path;
}

function expectOneLineError(stderr: string, text: string): void {
  expect(stderr.trim().split('\n')).toHaveLength(1);
  expect(stderr).toContain(text);
  expect(stderr).not.toMatch(/\n\s+at /);
}

describe.concurrent('idem migrate', () => {
  it('creates the file with the keys table, and is idempotent', async () => {
    const path = freshDbPath(dir);
    const first = await idem(['migrate', '--db', path]);
    expect(first.code).toBe(0);
    expect(first.stdout).toContain(path);
    expect(readRows(path)).toEqual([]);
    seedBacklog(path, { expired: 2, pending: 1 });
    expect((await idem(['migrate', '--db', path])).code).toBe(0);
    expect(tally(path)).toEqual({ expired: 2, live: 0, pending: 1, stalePending: 0 });
  });

  it('uses IDEM_DB, then ./idempotency.db in the working directory', async () => {
    const path = freshDbPath(dir);
    expect((await idem(['migrate'], { IDEM_DB: path })).code).toBe(0);
    expect(existsSync(path)).toBe(true);
    expect((await idem(['migrate'], {}, cwd)).code).toBe(0);
    expect(existsSync(join(cwd, 'idempotency.db'))).toBe(true);
  });

  it('fails with exit 1 and one line for a missing directory or a file that is not a database', async () => {
    const missing = await idem(['migrate', '--db', join(dir, 'nope', 'x.db')]);
    expect(missing.code).toBe(1);
    expectOneLineError(missing.stderr, 'does not exist');

    const text = join(dir, 'notes.db');
    writeFileSync(text, 'not a database, just text\n'.repeat(100));
    const before = readFileSync(text);
    const notDb = await idem(['stats', '--db', text]);
    expect(notDb.code).toBe(1);
    expectOneLineError(notDb.stderr, 'not a SQLite database');
    expect(readFileSync(text).equals(before)).toBe(true);
  });
});

describe.concurrent('idem stats', () => {
  it('prints pending, done, expired and stalePending at --now as JSON', async () => {
    const path = seeded({ expired: 3, live: 2, pending: 4, stalePending: 1 });
    const result = await idem(['stats', '--db', path, ...NOW, '--json']);
    expect(result.code).toBe(0);
    expect(jsonLine(result)).toEqual({
      pending: 5,
      done: 5,
      expired: 3,
      stalePending: 1,
      lapsed: 0,
      unrecorded: 0,
      now: SWEEP_NOW,
    });
    const human = await idem(['stats', '--db', path, ...NOW]);
    expect(human.stdout).toMatch(/^pending\s+5$/m);
    expect(human.stdout).toMatch(/^expired\s+3\b/m);
    expect(human.stdout).toMatch(/^stalePending\s+1\b/m);
  });

  it('defaults --now to the current time in epoch seconds', async () => {
    // Seeded rows expire around 1000 s after the epoch: long past today.
    const path = seeded({ expired: 2, live: 1 });
    expect(jsonLine(await idem(['stats', '--db', path, '--json']))).toMatchObject({
      expired: 3,
    });
  });

  it('refuses a missing database with exit 1 instead of creating an empty one', async () => {
    const path = freshDbPath(dir);
    const result = await idem(['stats', '--db', path]);
    expect(result.code).toBe(1);
    expectOneLineError(result.stderr, 'idem migrate');
    expect(existsSync(path)).toBe(false);
  });
});

describe.concurrent('idem expired and purge', () => {
  it('lists expired ids ascending without deleting them', async () => {
    const path = seeded({ expired: 5, stalePending: 3 });
    const result = await idem(['expired', '--db', path, ...NOW, '--limit', '3', '--json']);
    expect(result.code).toBe(0);
    expect(jsonLine(result)).toEqual({ ids: ['x-0000000', 'x-0000001', 'x-0000002'] });
    const lines = await idem(['expired', '--db', path, ...NOW]);
    expect(lines.stdout.trim().split('\n')).toHaveLength(5);
    expect(tally(path).expired).toBe(5);
  });

  it('purges one batch ascending by id, never a pending row', async () => {
    const path = seeded({ expired: 4, pending: 2, stalePending: 2 });
    const result = await idem(['purge', '--db', path, ...NOW, '--limit', '3', '--json']);
    expect(result.code).toBe(0);
    expect(jsonLine(result)).toEqual({ ids: ['x-0000000', 'x-0000001', 'x-0000002'] });
    expect(tally(path)).toEqual({ expired: 1, live: 0, pending: 2, stalePending: 2 });
    const rest = await idem(['purge', '--db', path, ...NOW]);
    expect(rest.stdout).toBe('x-0000003\n');
    expect(jsonLine(await idem(['purge', '--db', path, ...NOW, '--json']))).toEqual({ ids: [] });
    expect(tally(path)).toEqual({ expired: 0, live: 0, pending: 2, stalePending: 2 });
  });
});

describe.concurrent('idem sweep', () => {
  it('sweeps 10,000 expired rows among 20,000, keeping every pending row', async () => {
    const path = seeded({ expired: 10_000, live: 4_000, pending: 3_000, stalePending: 3_000 });
    const result = await idem(['sweep', '--db', path, ...NOW, '--batch', '500']);
    // stdout is a pipe here, not a TTY: one JSON summary line even without --json.
    expect(result.code).toBe(0);
    expect(jsonLine(result)).toMatchObject({
      deleted: 10_000,
      batches: 20,
      remaining: 0,
      backlog: 10_000,
      stoppedBy: 'drained',
    });
    expect(typeof jsonLine(result).seconds).toBe('number');
    expect(tally(path)).toEqual({ expired: 0, live: 4_000, pending: 3_000, stalePending: 3_000 });
  });

  it('stops at --max-batches, and reports a dry run without deleting', async () => {
    const path = seeded({ expired: 100, pending: 5 });
    const dry = await idem(['sweep', '--db', path, ...NOW, '--batch', '30', '--dry-run', '--json']);
    expect(jsonLine(dry)).toMatchObject({
      deleted: 0,
      batches: 0,
      remaining: 100,
      dryRun: true,
      wouldDelete: 100,
    });
    expect(tally(path).expired).toBe(100);
    const capped = await idem([
      'sweep',
      '--db',
      path,
      ...NOW,
      '--batch',
      '30',
      '--max-batches',
      '2',
      '--max-seconds',
      '600',
      '--json',
    ]);
    expect(capped.code).toBe(0);
    expect(jsonLine(capped)).toMatchObject({
      deleted: 60,
      batches: 2,
      remaining: 40,
      stoppedBy: 'maxBatches',
    });
    expect(tally(path)).toEqual({ expired: 40, live: 0, pending: 5, stalePending: 0 });
  });
});

describe('usage errors', () => {
  // The whole matrix of bad flags runs in-process in cli-usage.test.ts; these prove the real
  // executable's exit code and output.
  it('exit 2 with the usage shown, creating and changing nothing', async () => {
    const path = seeded({ expired: 3 });
    const missing = freshDbPath(dir);
    const cases: string[][] = [
      [],
      ['nonsense'],
      ['stats', '--db', path, '--verbose'],
      ['purge', '--db', path, '--limit', '101'],
      ['sweep', '--db', path, '--batch', '10001'],
      ['sweep', '--db', missing, '--max-batches', 'x'],
    ];
    const results = await Promise.all(cases.map((args) => idem(args)));
    results.forEach((result, index) => {
      expect({ args: cases[index], code: result.code }).toEqual({ args: cases[index], code: 2 });
      expect(result.stderr).toContain('Usage: idem');
      expect(result.stdout).toBe('');
    });
    expect(results[3]?.stderr).toContain('limit must be an integer from 1 to 100');
    expect(results[4]?.stderr).toContain('batch must be an integer from 1 to 10000');
    expect(tally(path).expired).toBe(3);
    expect(existsSync(missing)).toBe(false);
  });

  it('exit 1 with one line, no stack, for a PostgreSQL server that cannot be reached', async () => {
    // Port 1 on the loopback: nothing listens there.
    const url = 'postgres://postgres@127.0.0.1:1/test';
    const results = await Promise.all([
      idem(['sweep', '--url', url, '--schema', 'billing', '--json']),
      idem(['migrate'], { DATABASE_URL: url }),
    ]);
    for (const result of results) {
      expect(result.code).toBe(1);
      expect(result.stdout).toBe('');
      expectOneLineError(
        result.stderr,
        'cannot connect to PostgreSQL at postgres://postgres@127.0.0.1:1/test',
      );
    }
  });

  it('--help exits 0', async () => {
    const result = await idem(['sweep', '--help']);
    expect(result.code).toBe(0);
    expect(result.stdout).toContain('--max-seconds');
  });
});
