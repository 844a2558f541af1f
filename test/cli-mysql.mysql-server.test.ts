import { describe, expect, it } from 'vitest';
import type { RawRow } from './contract/harness.js';
import { SWEEP_NOW } from './support/backlog.js';
import { idem, jsonLine } from './support/cli.js';
import {
  freshMysqlDatabase,
  type MysqlDatabase,
  mysqlUrl,
  readMysqlRows,
  seedMysqlRows,
} from './support/mysql.js';

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
