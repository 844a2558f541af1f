import { describe, expect, it } from 'vitest';
import type { DeploymentFinding } from '../../src/index.js';
import { mysqlDeploymentFindings } from '../../src/mysql/deployment.js';
import { openMysqlStore } from '../../src/mysql/index.js';
import { idem, jsonLine } from '../support/cli.js';
import { freshMysqlDatabase, mysqlUrl } from '../support/mysql.js';

const url = mysqlUrl() as string;

describe('the deployment check on MySQL/MariaDB', () => {
  it('reads the server: the test server (InnoDB flushed per commit, no binary log, no Galera) has no finding', async () => {
    const fresh = await freshMysqlDatabase(url, 1);
    const warnings: DeploymentFinding[] = [];
    try {
      const store = await openMysqlStore(fresh.url, {
        poolSize: 1,
        onDeploymentWarning: (finding) => warnings.push(finding),
      });
      try {
        expect(warnings).toEqual([]);
        expect(await store.checkDeployment()).toEqual({ dialect: 'mysql', findings: [] });
      } finally {
        await store.close();
      }
    } finally {
      await fresh.drop();
    }
  });

  // The shared server's global settings must not be changed, so the settings that lose commits are
  // judged from values as SHOW GLOBAL VARIABLES gives them.
  it.each([
    [{ wsrep_on: 'ON' }, 'galera', 'wsrep_sync_wait'],
    [
      { innodb_flush_log_at_trx_commit: '2' },
      'innodb-flush-log',
      'innodb_flush_log_at_trx_commit = 1',
    ],
    [
      { innodb_flush_log_at_trx_commit: '0' },
      'innodb-flush-log',
      'innodb_flush_log_at_trx_commit = 1',
    ],
    [{ log_bin: 'ON', sync_binlog: '0' }, 'sync-binlog', 'sync_binlog = 1'],
    [{ read_only: 'ON' }, 'read-only-server', 'primary'],
  ] as const)('warns on %o with %s', (variables, code, fix) => {
    expect(mysqlDeploymentFindings(variables)).toEqual([
      expect.objectContaining({ level: 'warn', code, fix: expect.stringContaining(fix) }),
    ]);
  });

  it('says nothing of a sound configuration', () => {
    expect(
      mysqlDeploymentFindings({
        wsrep_on: 'OFF',
        innodb_flush_log_at_trx_commit: '1',
        log_bin: 'ON',
        sync_binlog: '1',
        read_only: 'OFF',
      }),
    ).toEqual([]);
    expect(mysqlDeploymentFindings({ log_bin: 'OFF', sync_binlog: '0' })).toEqual([]);
  });
});

describe('idem doctor on MySQL/MariaDB', () => {
  it('prints the check and exits 0 on the test server, in text and JSON, writing nothing', async () => {
    const fresh = await freshMysqlDatabase(url, 1);
    try {
      const text = await idem(['doctor', '--url', fresh.url]);
      expect(text.code).toBe(0);
      expect(text.stdout).toContain('ok, nothing found that loses answers');
      const json = await idem(['doctor', '--url', fresh.url, '--json']);
      expect(json.code).toBe(0);
      expect(jsonLine(json)).toMatchObject({ dialect: 'mysql', findings: [] });
      const [tables] = (await fresh.pool.query('SHOW TABLES')) as unknown as [unknown[]];
      expect(tables).toEqual([]);
    } finally {
      await fresh.drop();
    }
  });
});
