import {
  DeploymentCode,
  type DeploymentFinding,
  DeploymentLevel,
  type DeploymentReport,
  deploymentReport,
} from '../core/deployment.js';

/** The one method of a better-sqlite3 `Database` the check calls. */
export interface SqlitePragmaSource {
  pragma(source: string, options: { simple: true }): unknown;
}

/**
 * Reads the connection's `journal_mode` and `synchronous` and lists what can lose answers:
 *
 * - `synchronous = OFF`: SQLite hands writes to the OS without waiting, so a power loss or OS
 *   crash can lose committed answers or corrupt the file;
 * - a journal other than WAL: with `journal_mode = OFF` or `MEMORY` a crash in the middle of a
 *   write can corrupt the file; with a rollback journal (`DELETE`, `TRUNCATE`, `PERSIST`) below
 *   `synchronous = FULL` a power loss can, and every write blocks the readers; an in-memory
 *   database loses everything when the process ends.
 *
 * `synchronous = NORMAL` with WAL, `openSqliteStore`'s default, is no finding: a process crash
 * loses nothing, a power loss may roll back the last commits (use `synchronous: 'FULL'` where it
 * must not). Nothing is refused. `synchronous` is a setting of the connection, not of the file.
 *
 * @param client - a better-sqlite3 `Database` (a store's `db.$client`)
 * @example
 * ```ts
 * import Database from 'better-sqlite3';
 *
 * const report = checkSqliteDeployment(new Database('./idempotency.db'));
 * ```
 */
export function checkSqliteDeployment(client: SqlitePragmaSource): DeploymentReport {
  const journal = String(client.pragma('journal_mode', { simple: true })).toLowerCase();
  const synchronous = Number(client.pragma('synchronous', { simple: true }));
  const findings: DeploymentFinding[] = [];
  if (synchronous === 0) {
    findings.push({
      level: DeploymentLevel.warn,
      code: DeploymentCode.sqliteSynchronous,
      message:
        'synchronous is OFF: SQLite does not wait for the disk, so a power loss or an operating-system crash can lose committed answers or corrupt the database file.',
      fix: "synchronous = NORMAL with WAL, or FULL (openSqliteStore's synchronous option)",
    });
  }
  if (journal !== 'wal') {
    const corrupting = journal === 'off' || journal === 'memory';
    findings.push({
      level: DeploymentLevel.warn,
      code: DeploymentCode.sqliteJournal,
      message: corrupting
        ? `journal_mode is ${journal}: a crash in the middle of a write can leave the database corrupt, and every stored answer with it${journal === 'memory' ? ' (an in-memory database loses all of them when the process ends)' : ''}.`
        : `journal_mode is ${journal}, not WAL: below synchronous = FULL a power loss can corrupt the database file, and every write blocks the readers, so replays wait behind it.`,
      fix: 'PRAGMA journal_mode = WAL (openSqliteStore sets it) on a database file',
    });
  }
  return deploymentReport('sqlite', findings);
}
