import { sql } from 'drizzle-orm';
import {
  DeploymentCode,
  type DeploymentFinding,
  DeploymentLevel,
  type DeploymentReport,
  deploymentReport,
} from '../core/deployment.js';
import { type AnyMysqlDatabase, queryRows } from './client.js';

// Read as global variables: the settings a failure meets are the server's, whatever a session set.
const VARIABLES = [
  'wsrep_on',
  'innodb_flush_log_at_trx_commit',
  'log_bin',
  'sync_binlog',
  'read_only',
] as const;

type Variable = (typeof VARIABLES)[number];

/** The server variables the MySQL deployment check reads, upper-cased; a missing one is absent. */
export type MysqlDeploymentVariables = Partial<Record<Variable, string>>;

/**
 * Reads what the MySQL or MariaDB server says about the store's deployment, without writing, and
 * lists what can lose answers: a Galera node (`wsrep_on`), `innodb_flush_log_at_trx_commit` other
 * than 1, a binary log without `sync_binlog = 1`, and a read-only server (a replica). None is
 * refused: the keys table's engine (InnoDB) is already checked before the migrations run.
 *
 * @param db - a drizzle mysql2 database
 * @example
 * ```ts
 * const report = await checkMysqlDeployment(db);
 * for (const finding of report.findings) console.warn(finding.code, finding.message, finding.fix);
 * ```
 */
export async function checkMysqlDeployment(db: AnyMysqlDatabase): Promise<DeploymentReport> {
  const rows = await queryRows<{ Variable_name: string; Value: string }>(
    db,
    sql`SHOW GLOBAL VARIABLES WHERE Variable_name IN (${sql.join(
      VARIABLES.map((name) => sql`${name}`),
      sql`, `,
    )})`,
  );
  const variables: MysqlDeploymentVariables = {};
  for (const row of rows) {
    const name = row.Variable_name.toLowerCase() as Variable;
    if (VARIABLES.includes(name)) variables[name] = row.Value.toUpperCase();
  }
  return deploymentReport('mysql', mysqlDeploymentFindings(variables));
}

/**
 * The findings of {@link checkMysqlDeployment} for the server variables it read.
 *
 * @param variables - the values of the variables, upper-cased
 * @example
 * ```ts
 * mysqlDeploymentFindings({ innodb_flush_log_at_trx_commit: '2' })[0]?.code; // 'innodb-flush-log'
 * ```
 */
export function mysqlDeploymentFindings(variables: MysqlDeploymentVariables): DeploymentFinding[] {
  const value = (name: Variable) => variables[name];
  const findings: DeploymentFinding[] = [];
  if (value('wsrep_on') === 'ON') {
    findings.push({
      level: DeploymentLevel.warn,
      code: DeploymentCode.galera,
      message:
        'the server is a Galera cluster node (wsrep_on = ON): writes racing on one key from several nodes end in certification conflicts (1213); and a node may read an answer another node has just stored as missing. This library does not test Galera yet.',
      fix: 'send the store to one node (or set wsrep_sync_wait = 1 for its sessions), and keep wsrep_on with a quorum',
    });
  }
  const flush = value('innodb_flush_log_at_trx_commit');
  if (flush !== undefined && flush !== '1') {
    findings.push({
      level: DeploymentLevel.warn,
      code: DeploymentCode.innodbFlushLog,
      message: `innodb_flush_log_at_trx_commit is ${flush}: a commit is acknowledged before its redo log is on disk, so the answers of about the last second are lost when ${flush === '2' ? 'the operating system crashes or the power fails' : 'mysqld crashes'}, and their retries run the effect again.`,
      fix: 'innodb_flush_log_at_trx_commit = 1',
    });
  }
  const syncBinlog = value('sync_binlog');
  if (value('log_bin') === 'ON' && syncBinlog !== undefined && syncBinlog !== '1') {
    findings.push({
      level: DeploymentLevel.warn,
      code: DeploymentCode.syncBinlog,
      message: `the binary log is on with sync_binlog = ${syncBinlog}: an operating-system crash can drop committed answers from the binary log, so replicas (and a failover to one) and point-in-time recovery miss them.`,
      fix: 'sync_binlog = 1',
    });
  }
  if (value('read_only') === 'ON') {
    findings.push({
      level: DeploymentLevel.warn,
      code: DeploymentCode.readOnlyServer,
      message:
        'the server is read-only (read_only = ON, a replica): the store cannot write there, and answers read there lag the primary, so a finished request can read as missing or in progress.',
      fix: 'connect the store to the primary',
    });
  }
  return findings;
}
