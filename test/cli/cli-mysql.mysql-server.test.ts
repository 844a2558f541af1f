import { describe, expect, it } from 'vitest';
import { storedId } from '../../src/http/scope.js';
import { openMysqlStore } from '../../src/mysql/index.js';
import type { RawRow } from '../contract/harness.js';
import { SWEEP_NOW } from '../support/backlog.js';
import { idem, idemInShell, jsonLine } from '../support/cli.js';
import {
  freshMysqlDatabase,
  type MysqlDatabase,
  mysqlUrl,
  readMysqlRows,
  seedMysqlRows,
} from '../support/mysql.js';

// Collected only when MYSQL_URL is set (see vitest.config.ts); then an unreachable server fails.
const url = mysqlUrl() as string;
const NOW = ['--now', String(SWEEP_NOW)];

/** Runs `use` on a fresh empty database, dropped afterwards. */
async function withDatabase(use: (fresh: MysqlDatabase) => Promise<void>): Promise<void> {
  const fresh = await freshMysqlDatabase(url, 2);
  try {
    await use(fresh);
  } finally {
    await fresh.drop();
  }
}

const row = (id: string, status: string, expires: number): RawRow => ({
  id,
  fingerprint: 'f',
  status,
  response: status === 'done' ? '{"r":1}' : null,
  expires,
});

describe.concurrent('idem on MySQL', () => {
  it('migrate creates the table; the other commands refuse a database without it', async () => {
    await withDatabase(async (fresh) => {
      const refused = await idem(['stats', '--url', fresh.url, ...NOW, '--json']);
      expect(refused.code).toBe(1);
      expect(refused.stdout).toBe('');
      expect(refused.stderr).toContain('idem migrate --url URL');
      expect(refused.stderr).not.toMatch(/\n\s+at /);
      const migrated = await idem(['migrate', '--url', fresh.url]);
      expect(migrated.code).toBe(0);
      expect(jsonLine(await idem(['stats', '--url', fresh.url, ...NOW, '--json']))).toEqual({
        pending: 0,
        done: 0,
        expired: 0,
        stalePending: 0,
        lapsed: 0,
        unrecorded: 0,
        now: SWEEP_NOW,
      });
      const renamed = ['--url', fresh.url, '--table', 'idem_keys'];
      expect((await idem(['stats', ...renamed])).stderr).toContain('--table idem_keys');
      expect((await idem(['migrate', ...renamed])).code).toBe(0);
      expect(jsonLine(await idem(['stats', ...renamed, ...NOW, '--json']))).toMatchObject({
        pending: 0,
      });
      const [tables] = (await fresh.pool.query(
        'SELECT TABLE_NAME AS name FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE()',
      )) as unknown as [{ name: string }[]];
      expect(tables.map((table) => table.name).sort()).toEqual([
        '__idempotency_migrations',
        '__idempotency_migrations_idem_keys',
        'idem_keys',
        'keys',
      ]);
    });
  });

  it('stats, expired, purge and sweep work on the table; pending rows stay', async () => {
    await withDatabase(async (fresh) => {
      expect((await idem(['migrate', '--url', fresh.url])).code).toBe(0);
      const expired = Array.from({ length: 25 }, (_, i) =>
        row(`x-${String(i).padStart(3, '0')}`, 'done', 1),
      );
      await seedMysqlRows(fresh.db, [
        ...expired,
        row('live', 'done', SWEEP_NOW + 100),
        row('pending', 'pending', 1),
      ]);
      const on = ['--url', fresh.url, ...NOW];
      expect(jsonLine(await idem(['stats', ...on, '--json']))).toEqual({
        pending: 1,
        done: 26,
        expired: 25,
        stalePending: 1,
        lapsed: 0,
        unrecorded: 0,
        now: SWEEP_NOW,
      });
      const ids = { ids: ['x-000', 'x-001', 'x-002'] };
      expect(jsonLine(await idem(['expired', ...on, '--limit', '3', '--json']))).toEqual(ids);
      expect(jsonLine(await idem(['purge', ...on, '--limit', '3', '--json']))).toEqual(ids);
      const swept = await idem(['sweep', ...on, '--batch', '5', '--json']);
      expect(swept.code).toBe(0);
      expect(jsonLine(swept)).toMatchObject({ deleted: 22, remaining: 0 });
      expect((await readMysqlRows(fresh.db)).map((r) => r.id)).toEqual(['live', 'pending']);
    });
  });

  it('fails with exit 1 and one line when the server cannot be reached', async () => {
    const result = await idem(['stats', '--url', 'mysql://root:secret@127.0.0.1:1/test']);
    expect(result.code).toBe(1);
    expect(result.stderr.trim().split('\n')).toHaveLength(1);
    expect(result.stderr).toContain('cannot connect to MySQL');
    expect(result.stderr).not.toContain('secret');
  });
});

describe('the operator commands on MySQL', () => {
  async function tables(fresh: MysqlDatabase): Promise<string[]> {
    const [rows] = (await fresh.pool.query(
      'SELECT TABLE_NAME AS name FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE() ORDER BY TABLE_NAME',
    )) as unknown as [{ name: string }[]];
    return rows.map((entry) => entry.name);
  }

  it('read commands read a table without our journal and refuse a missing one, creating nothing', async () => {
    await withDatabase(async (fresh) => {
      expect((await idem(['migrate', '--url', fresh.url])).code).toBe(0);
      // The journal dropped: the table is as the application's own drizzle-kit migrations make
      // it from the exported table, every column there and no journal of ours.
      await fresh.pool.query('DROP TABLE __idempotency_migrations');
      const before = await tables(fresh);
      const reads = [['stats'], ['expired'], ['pending'], ['show', 'k'], ['sweep', '--dry-run']];
      const read = await Promise.all(
        reads.map((flags) => idem([...flags, '--url', fresh.url, '--json'])),
      );
      // `show k` finds no such key (exit 1, with a hint); every other command answers.
      expect(read.map((result) => result.code)).toEqual([0, 0, 0, 1, 0]);
      expect(read[3]?.stderr).toContain('no row with the key k');
      const missing = await Promise.all(
        reads.map((flags) => idem([...flags, '--url', fresh.url, '--table', 'nope', '--json'])),
      );
      for (const result of missing) {
        expect(result.code).toBe(1);
        expect(result.stdout).toBe('');
        expect(result.stderr.trim().split('\n')).toHaveLength(1);
        expect(result.stderr).toContain('idem migrate --url URL --table nope"');
      }
      expect(await tables(fresh)).toEqual(before);
      expect(before).toEqual(['keys']);
    });
  });

  it('pending, show and release with --scope and hostile keys, pasted back through a shell', async () => {
    await withDatabase(async (fresh) => {
      const store = await openMysqlStore(fresh.pool);
      const lease = { expires: 1000, now: 100, leaseSeconds: 30 };
      const ids = [
        storedId('client-7', 'order-42'),
        storedId('client-7', 'esc\u001b[2J'),
        storedId('client-77', 'order-42'),
        'line\nforged',
      ];
      const tokens = new Map<string, number>();
      for (const id of ids) {
        const claim = await store.acquire(id, 'fp', lease);
        if (claim.status === 'acquired') tokens.set(id, claim.fencingToken);
      }
      await store.close();
      const scoped = await idem([
        'pending',
        '--url',
        fresh.url,
        '--now',
        '110',
        '--scope',
        'client-7',
      ]);
      expect(scoped.code).toBe(0);
      expect(scoped.stdout).toBe(
        [
          `--scope client-7 '"esc\\u001b[2J"'  live  token ${tokens.get(storedId('client-7', 'esc\u001b[2J'))}  lease ends in 20s  expires in 14m 50s`,
          `--scope client-7 order-42  live  token ${tokens.get(storedId('client-7', 'order-42'))}  lease ends in 20s  expires in 14m 50s`,
          '',
        ].join('\n'),
      );
      const all = await idem(['pending', '--url', fresh.url, '--now', '1013.5']);
      expect(all.stdout).toContain(
        `'"line\\u000aforged"'  lapsed  token ${tokens.get('line\nforged')}  lease ended 14m 43s ago  expired 13.5s ago\n`,
      );
      const words = (scoped.stdout.split('\n')[0] ?? '').split('  ')[0] ?? '';
      const shown = await idemInShell(`show ${words} --url '${fresh.url}' --now 110 --json`);
      expect(jsonLine(shown)).toMatchObject({
        key: storedId('client-7', 'esc\u001b[2J'),
        status: 'pending',
        leaseUntil: 130,
        fencingToken: tokens.get(storedId('client-7', 'esc\u001b[2J')),
        answer: null,
      });
      const released = await idemInShell(`release ${words} --yes --json --url '${fresh.url}'`);
      expect(jsonLine(released)).toEqual({
        key: storedId('client-7', 'esc\u001b[2J'),
        result: 'released',
      });
      expect((await readMysqlRows(fresh.db)).map((r) => r.id)).toEqual(
        ids.filter((id) => id !== storedId('client-7', 'esc\u001b[2J')).sort(),
      );
    });
  });

  it('never prints the password of the URL, in messages or in --json output', async () => {
    await withDatabase(async (fresh) => {
      const withPassword = new URL(fresh.url);
      withPassword.password = 's3cret-pw';
      const results = await Promise.all([
        idem(['migrate', '--url', withPassword.toString(), '--json']),
        idem(['stats', '--url', withPassword.toString(), '--table', 'nope']),
      ]);
      for (const result of results) {
        expect(`${result.stdout}${result.stderr}`).not.toContain('s3cret-pw');
      }
      // root has no password on the test server, so one given is refused or ignored; either way
      // what is printed shows it masked.
      expect(`${results[0]?.stdout}${results[0]?.stderr}`).toContain(':***@');
      expect(results[1]?.code).toBe(1);
      expect(results[1]?.stderr).toContain(':***@');
    });
  });
});
