import { describe, expect, it } from 'vitest';
import { openSqliteStore } from '../src/sqlite/index.js';
import { idem, jsonLine } from './support/cli.js';
import { readRows } from './support/sqlite-harness.js';
import { freshDbPath, tempDir } from './support/temp.js';

const dir = tempDir('idem-cli-leases-');

// live (lease to 130), lapsed (to 101), unrecorded, unleased, and a done row, judged at now = 110.
function seeded(): string {
  const path = freshDbPath(dir);
  const store = openSqliteStore(path);
  store.acquire('a-live', 'fa', { expires: 1000, now: 100, leaseSeconds: 30 });
  store.acquire('b-lapsed', 'fb', { expires: 1000, now: 100, leaseSeconds: 1 });
  store.acquire('c-unrecorded', 'fc', { expires: 1000, now: 100, leaseSeconds: 30 });
  store.markUnrecorded('c-unrecorded', 'fc', 1);
  store.reserve('d-unleased', 'fd', 1000);
  store.acquire('e-done', 'fe', { expires: 1000, now: 100, leaseSeconds: 30 });
  store.finish('e-done', 'fe', { ok: true }, 1);
  store.close();
  return path;
}

describe.concurrent('idem pending', () => {
  it('--json prints an array of the pending rows with their lease state', async () => {
    const path = seeded();
    const result = await idem(['pending', '--db', path, '--now', '110', '--json']);
    expect(result.code).toBe(0);
    expect(JSON.parse(result.stdout)).toEqual([
      {
        key: 'a-live',
        fingerprint: 'fa',
        expires: 1000,
        leaseUntil: 130,
        attempt: 1,
        state: 'live',
      },
      {
        key: 'b-lapsed',
        fingerprint: 'fb',
        expires: 1000,
        leaseUntil: 101,
        attempt: 1,
        state: 'lapsed',
      },
      {
        key: 'c-unrecorded',
        fingerprint: 'fc',
        expires: 1000,
        leaseUntil: null,
        attempt: 1,
        state: 'unrecorded',
      },
      {
        key: 'd-unleased',
        fingerprint: 'fd',
        expires: 1000,
        leaseUntil: null,
        attempt: 1,
        state: 'unleased',
      },
    ]);
    const stale = await idem([
      'pending',
      '--db',
      path,
      '--now',
      '110',
      '--stale',
      '--limit',
      '1',
      '--json',
    ]);
    expect(JSON.parse(stale.stdout).map((row: { key: string }) => row.key)).toEqual(['b-lapsed']);
    const human = await idem(['pending', '--db', path, '--now', '110']);
    expect(human.stdout).toMatch(/^b-lapsed {2}lapsed {2}attempt 1 {2}lease ended 9s ago/m);
    expect(human.stdout.trim().split('\n')).toHaveLength(4);
  });

  it('idem stats counts lapsed and unrecorded rows', async () => {
    const path = seeded();
    const stats = await idem(['stats', '--db', path, '--now', '110', '--json']);
    expect(jsonLine(stats)).toMatchObject({ pending: 4, done: 1, lapsed: 1, unrecorded: 1 });
    const human = await idem(['stats', '--db', path, '--now', '110']);
    expect(human.stdout).toMatch(/^lapsed\s+1\b/m);
    expect(human.stdout).toMatch(/^unrecorded\s+1\b/m);
  });

  it('refuses a --limit out of range with exit 2', async () => {
    const result = await idem(['pending', '--db', seeded(), '--limit', '0']);
    expect(result.code).toBe(2);
  });
});

describe.concurrent('idem release', () => {
  it('deletes one pending row with --yes (exit 0), whatever its lease', async () => {
    const path = seeded();
    for (const key of ['a-live', 'c-unrecorded']) {
      const result = await idem(['release', key, '--yes', '--db', path]);
      expect(result.code).toBe(0);
      expect(result.stdout).toBe(`released ${key}\n`);
    }
    expect(readRows(path).map((row) => row.id)).toEqual(['b-lapsed', 'd-unleased', 'e-done']);
  });

  it('asks for --yes and changes nothing without it (exit 2)', async () => {
    const path = seeded();
    const before = readRows(path);
    const result = await idem(['release', 'a-live', '--db', path]);
    expect(result.code).toBe(2);
    expect(result.stderr).toContain('--yes');
    expect(readRows(path)).toEqual(before);
  });

  it('refuses a done row, a missing key and another fingerprint (exit 1), changing nothing', async () => {
    const path = seeded();
    const before = readRows(path);
    for (const [args, message] of [
      [['e-done'], 'is done'],
      [['nope'], 'no row'],
      [['b-lapsed', '--fingerprint', 'other'], 'another fingerprint'],
    ] as const) {
      const result = await idem(['release', ...args, '--yes', '--db', path]);
      expect(result.code).toBe(1);
      expect(result.stderr).toContain(message);
      expect(result.stderr).toContain('nothing changed');
    }
    expect(readRows(path)).toEqual(before);
    const precise = await idem([
      'release',
      'b-lapsed',
      '--fingerprint',
      'fb',
      '--yes',
      '--db',
      path,
    ]);
    expect(precise.code).toBe(0);
  });
});
