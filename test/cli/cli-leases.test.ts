import { describe, expect, it } from 'vitest';
import { openSqliteStore } from '../../src/sqlite/index.js';
import { tokenOf } from '../contract/lease-contract.js';
import { idem, jsonLine } from '../support/cli.js';
import { readRows } from '../support/sqlite-harness.js';
import { freshDbPath, tempDir } from '../support/temp.js';

const dir = tempDir('idem-cli-leases-');

// The fencing tokens the seeded rows were acquired with, by file and key.
const tokens = new Map<string, number>();

// live (lease to 130), lapsed (to 101), unrecorded, unleased, and a done row, judged at now = 110.
function seeded(): string {
  const path = freshDbPath(dir);
  const store = openSqliteStore(path);
  const acquire = (key: string, fingerprint: string, leaseSeconds: number) => {
    const token = tokenOf(
      store.acquire(key, fingerprint, { expires: 1000, now: 100, leaseSeconds }),
    );
    tokens.set(`${path}:${key}`, token);
    return token;
  };
  acquire('a-live', 'fa', 30);
  acquire('b-lapsed', 'fb', 1);
  store.markUnrecorded('c-unrecorded', 'fc', acquire('c-unrecorded', 'fc', 30));
  store.reserve('d-unleased', 'fd', 1000);
  store.finish('e-done', 'fe', { ok: true }, acquire('e-done', 'fe', 30));
  store.close();
  return path;
}

const tokenAt = (path: string, key: string) => tokens.get(`${path}:${key}`);

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
        fencingToken: tokenAt(path, 'a-live'),
        state: 'live',
        lastStep: null,
      },
      {
        key: 'b-lapsed',
        fingerprint: 'fb',
        expires: 1000,
        leaseUntil: 101,
        fencingToken: tokenAt(path, 'b-lapsed'),
        state: 'lapsed',
        lastStep: null,
      },
      {
        key: 'c-unrecorded',
        fingerprint: 'fc',
        expires: 1000,
        leaseUntil: null,
        fencingToken: tokenAt(path, 'c-unrecorded'),
        state: 'unrecorded',
        lastStep: null,
      },
      {
        key: 'd-unleased',
        fingerprint: 'fd',
        expires: 1000,
        leaseUntil: null,
        fencingToken: 1,
        state: 'unleased',
        lastStep: null,
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
    expect(human.stdout).toMatch(
      new RegExp(
        `^b-lapsed {2}lapsed {2}token ${tokenAt(path, 'b-lapsed')} {2}lease ended 9s ago`,
        'm',
      ),
    );
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
  it('deletes a pending row nobody works on with --yes (exit 0): lapsed, unrecorded, unleased', async () => {
    const path = seeded();
    for (const key of ['b-lapsed', 'c-unrecorded', 'd-unleased']) {
      const result = await idem(['release', key, '--yes', '--db', path, '--now', '110']);
      expect(result.code).toBe(0);
      expect(result.stdout).toBe(`released ${key}\n`);
    }
    expect(readRows(path).map((row) => row.id)).toEqual(['a-live', 'e-done']);
  });

  it('refuses a live lease (exit 1) with the lease left and the token, unless --force', async () => {
    const path = seeded();
    const before = readRows(path);
    const refused = await idem(['release', 'a-live', '--yes', '--db', path, '--now', '110']);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain(
      `a-live is held by a live lease (token ${tokenAt(path, 'a-live')}, ends in 20s)`,
    );
    expect(refused.stderr).toContain('nothing changed');
    expect(readRows(path)).toEqual(before);
    const forced = await idem([
      'release',
      'a-live',
      '--yes',
      '--force',
      '--db',
      path,
      '--now',
      '110',
    ]);
    expect(forced.code).toBe(0);
    expect(readRows(path).map((row) => row.id)).not.toContain('a-live');
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
