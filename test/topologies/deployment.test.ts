import Database from 'better-sqlite3';
import { afterEach, describe, expect, it, vi } from 'vitest';
import type { DeploymentFinding } from '../../src/index.js';
import { openSqliteStore } from '../../src/sqlite/index.js';
import { idem, jsonLine } from '../support/cli.js';
import { freshDbPath, tempDir } from '../support/temp.js';

const dir = tempDir('idem-deployment-');

afterEach(() => {
  vi.restoreAllMocks();
});

describe('the deployment check on SQLite', () => {
  it('has no finding for the default open: WAL, synchronous NORMAL', () => {
    const warnings: DeploymentFinding[] = [];
    const store = openSqliteStore(freshDbPath(dir), {
      onDeploymentWarning: (finding) => warnings.push(finding),
    });
    try {
      expect(warnings).toEqual([]);
      expect(store.checkDeployment()).toEqual({ dialect: 'sqlite', findings: [] });
    } finally {
      store.close();
    }
  });

  it('hands synchronous OFF to onDeploymentWarning, and never writes to the console', () => {
    const console = [vi.spyOn(globalThis.console, 'warn'), vi.spyOn(globalThis.console, 'log')];
    const warnings: DeploymentFinding[] = [];
    const store = openSqliteStore(freshDbPath(dir), {
      synchronous: 'OFF',
      onDeploymentWarning: (finding) => warnings.push(finding),
    });
    store.close();
    expect(warnings).toEqual([
      expect.objectContaining({ level: 'warn', code: 'sqlite-synchronous' }),
    ]);
    openSqliteStore(freshDbPath(dir), { synchronous: 'OFF' }).close();
    for (const spy of console) expect(spy).not.toHaveBeenCalled();
  });

  it('warns that an in-memory database loses every answer with the process', () => {
    const store = openSqliteStore(':memory:');
    try {
      expect(store.checkDeployment().findings).toEqual([
        expect.objectContaining({
          code: 'sqlite-journal',
          message: expect.stringContaining('in-memory'),
        }),
      ]);
    } finally {
      store.close();
    }
  });
});

describe('idem doctor on SQLite', () => {
  it('exits 0 on a store made by idem migrate, and 3 with the warning once the file leaves WAL', async () => {
    const path = freshDbPath(dir);
    expect((await idem(['migrate', '--db', path])).code).toBe(0);
    const sound = await idem(['doctor', '--db', path]);
    expect(sound.code).toBe(0);
    expect(sound.stdout).toContain('ok, nothing found that loses answers');
    const client = new Database(path);
    client.pragma('journal_mode = DELETE');
    client.close();
    const text = await idem(['doctor', '--db', path]);
    expect(text.code).toBe(3);
    expect(text.stdout).toContain('warn sqlite-journal: journal_mode is delete, not WAL');
    expect(text.stdout).toContain('fix: PRAGMA journal_mode = WAL');
    const json = await idem(['doctor', '--db', path, '--json']);
    expect(json.code).toBe(3);
    expect(jsonLine(json)).toMatchObject({
      dialect: 'sqlite',
      findings: [{ level: 'warn', code: 'sqlite-journal' }],
    });
  });

  it('refuses a missing file with exit 1 instead of creating it', async () => {
    const path = freshDbPath(dir);
    const result = await idem(['doctor', '--db', path]);
    expect(result.code).toBe(1);
    expect(result.stderr).toContain(`no database at ${path}`);
  });
});
