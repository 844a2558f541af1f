import { existsSync, readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { openSqliteStore, sqliteKeysTable } from '../../src/sqlite/index.js';
import { idem, jsonLine } from '../support/cli.js';
import { readRows } from '../support/sqlite-harness.js';
import { freshDbPath, tempDir } from '../support/temp.js';

const dir = tempDir('idem-cli-table-');

describe.concurrent('idem --table', () => {
  it('migrates and reads a renamed keys table, leaving the default one alone', async () => {
    const path = freshDbPath(dir);
    expect((await idem(['migrate', '--db', path, '--table', 'idem_keys'])).code).toBe(0);
    expect(readRows(path, 'idem_keys')).toEqual([]);
    const store = openSqliteStore(path, { table: sqliteKeysTable('idem_keys') });
    store.reserve('a', 'd', 10);
    store.reserve('b', 'd', 10);
    store.finish('b', 'd', { ok: 1 });
    store.close();
    const stats = await idem([
      'stats',
      '--db',
      path,
      '--table',
      'idem_keys',
      '--now',
      '20',
      '--json',
    ]);
    expect(stats.code).toBe(0);
    expect(jsonLine(stats)).toMatchObject({ pending: 1, done: 1, expired: 1 });
    const purge = await idem([
      'purge',
      '--db',
      path,
      '--table',
      'idem_keys',
      '--now',
      '20',
      '--json',
    ]);
    expect(jsonLine(purge)).toEqual({ ids: ['b'] });
    // The default table is not there: refused, not created (the file keeps its bytes).
    const before = readFileSync(path);
    const defaults = await idem(['stats', '--db', path, '--now', '20', '--json']);
    expect(defaults.code).toBe(1);
    expect(defaults.stderr).toContain(`idem migrate --db ${path}`);
    expect(readFileSync(path).equals(before)).toBe(true);
  });

  it('refuses a table name the library cannot use, with exit 2 and nothing created', async () => {
    const path = freshDbPath(dir);
    const result = await idem(['migrate', '--db', path, '--table', 'no-dashes']);
    expect(result.code).toBe(2);
    expect(result.stderr).toContain('table name');
    expect(existsSync(path)).toBe(false);
  });
});
