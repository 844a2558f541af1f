import { ErrorCode, IdempotencyError } from './errors.js';

/**
 * How grave a deployment finding is: `refuse` loses answers for sure (the store will not open on
 * it), `warn` can lose them in a failure (a crash, a failover) or costs what a setting avoids.
 */
export const DeploymentLevel = {
  refuse: 'refuse',
  warn: 'warn',
} as const;

/** One of the values of {@link DeploymentLevel}. */
export type DeploymentLevel = (typeof DeploymentLevel)[keyof typeof DeploymentLevel];

/** The stable codes of deployment findings. Match on these rather than on messages. */
export const DeploymentCode = {
  /** PostgreSQL: the keys table is UNLOGGED (or temporary): a crash empties it. */
  unloggedTable: 'unlogged-table',
  /** PostgreSQL: `synchronous_commit` is `local` or `off`. */
  synchronousCommit: 'synchronous-commit',
  /** PostgreSQL: the server streams to standbys that do not confirm commits. */
  asynchronousStandby: 'asynchronous-standby',
  /** PostgreSQL: the connection is to a standby in recovery. */
  standbyConnection: 'standby-connection',
  /** PostgreSQL: a connection pooler sits between the store and the server. */
  pooler: 'pooler',
  /** MySQL/MariaDB: the server is a Galera cluster node. */
  galera: 'galera',
  /** MySQL/MariaDB: `innodb_flush_log_at_trx_commit` is not 1. */
  innodbFlushLog: 'innodb-flush-log',
  /** MySQL/MariaDB: the binary log is on and `sync_binlog` is not 1. */
  syncBinlog: 'sync-binlog',
  /** MySQL/MariaDB: the server is read-only (a replica). */
  readOnlyServer: 'read-only-server',
  /** SQLite: `synchronous` is OFF. */
  sqliteSynchronous: 'sqlite-synchronous',
  /** SQLite: the journal is not WAL. */
  sqliteJournal: 'sqlite-journal',
} as const;

/** One of the values of {@link DeploymentCode}. */
export type DeploymentCode = (typeof DeploymentCode)[keyof typeof DeploymentCode];

/** What the deployment check found about one setting. */
export interface DeploymentFinding {
  /** `refuse` or `warn`, see {@link DeploymentLevel}. */
  readonly level: DeploymentLevel;
  /** A stable code, see {@link DeploymentCode}. */
  readonly code: DeploymentCode;
  /** What was found and what can be lost because of it. */
  readonly message: string;
  /** The setting or step that removes the risk. */
  readonly fix: string;
}

/** What the deployment check read from the server or file, and what it found. */
export interface DeploymentReport {
  /** The dialect checked. */
  readonly dialect: 'pg' | 'mysql' | 'sqlite';
  /** Every finding, refusals first. Empty when nothing was found. */
  readonly findings: readonly DeploymentFinding[];
}

/**
 * Receives each `warn` finding of the check a store runs when it opens (`openPgStore`,
 * `openMysqlStore`, `openSqliteStore`). Without it, warnings are not reported anywhere: the library
 * never writes to the console on its own. What the hook throws is not caught.
 */
export type DeploymentWarningHook = (finding: DeploymentFinding) => void;

/** The option of the open functions that delivers deployment warnings. */
export interface DeploymentWarningOptions {
  /** See {@link DeploymentWarningHook}. */
  readonly onDeploymentWarning?: DeploymentWarningHook;
}

/**
 * The deployment check refused the store: a setting loses stored answers for sure (an UNLOGGED
 * keys table empties at the first crash). Nothing was written. `findings` holds the refusals.
 */
export class DeploymentRefusedError extends IdempotencyError {
  /** The `refuse` findings. */
  readonly findings: readonly DeploymentFinding[];

  /** @param findings - the `refuse` findings, at least one */
  constructor(findings: readonly DeploymentFinding[]) {
    super(
      ErrorCode.deploymentRefused,
      `the deployment loses idempotency answers: ${findings
        .map((finding) => `${finding.message} Fix: ${finding.fix}`)
        .join(' ')}`,
    );
    this.findings = findings;
  }
}

/**
 * Orders findings (refusals first) into a report.
 *
 * @param dialect - the dialect checked
 * @param findings - the findings, in the order they were found
 */
export function deploymentReport(
  dialect: DeploymentReport['dialect'],
  findings: readonly DeploymentFinding[],
): DeploymentReport {
  const refusals = findings.filter((finding) => finding.level === DeploymentLevel.refuse);
  const warnings = findings.filter((finding) => finding.level !== DeploymentLevel.refuse);
  return { dialect, findings: [...refusals, ...warnings] };
}

/**
 * What a store does with its report when it opens: throws on a refusal, before anything is
 * written, and hands every warning to the hook (if any).
 *
 * @param report - the deployment report
 * @param options - the open function's options
 * @throws {@link DeploymentRefusedError} when the report holds a refusal
 */
export function enforceDeployment(
  report: DeploymentReport,
  options: DeploymentWarningOptions,
): void {
  const refusals = report.findings.filter((finding) => finding.level === DeploymentLevel.refuse);
  if (refusals.length > 0) throw new DeploymentRefusedError(refusals);
  for (const finding of report.findings) options.onDeploymentWarning?.(finding);
}
