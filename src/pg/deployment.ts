import { sql } from 'drizzle-orm';
import {
  DeploymentCode,
  type DeploymentFinding,
  DeploymentLevel,
  type DeploymentReport,
  deploymentReport,
} from '../core/deployment.js';
import { type AnyPgDatabase, queryRows } from './client.js';
import { keysTablePersistenceFinding } from './migrate.js';
import { type PgTableOptions, resolvePgTable } from './schema.js';

/** Options of {@link checkPgDeployment}. */
export interface PgDeploymentOptions extends PgTableOptions {
  /**
   * Whether the store sends named statements (its `prepare` option, default `true`): only then is
   * a detected pooler worth a warning.
   */
  readonly prepare?: boolean;
}

// The levels of synchronous_commit at which a commit is acknowledged only once it is flushed on
// the primary and, when synchronous standbys are configured, received by them.
const DURABLE_COMMIT = ['on', 'remote_apply', 'remote_write'];

interface ServerFacts {
  persistence: string | null;
  synchronous_commit: string;
  standby_names: string;
  in_recovery: boolean;
  standbys: number | string;
  async_standbys: number | string;
}

// The connection-level facts, read in one statement. Logical replication walsenders (a CDC
// consumer's slot) are no failover target, so they do not count as standbys.
function serverFacts(db: AnyPgDatabase, schema: string, name: string) {
  return queryRows<ServerFacts>(
    db,
    sql`WITH physical AS (
          SELECT r.sync_state FROM pg_stat_replication r
          WHERE NOT EXISTS (SELECT 1 FROM pg_replication_slots s
                            WHERE s.slot_type = 'logical' AND s.active_pid = r.pid))
        SELECT
          (SELECT c.relpersistence::text FROM pg_class c
             JOIN pg_namespace n ON n.oid = c.relnamespace
             WHERE n.nspname = ${schema} AND c.relname = ${name}) AS persistence,
          current_setting('synchronous_commit') AS synchronous_commit,
          current_setting('synchronous_standby_names') AS standby_names,
          pg_is_in_recovery() AS in_recovery,
          (SELECT count(*) FROM physical) AS standbys,
          (SELECT count(*) FROM physical WHERE sync_state = 'async') AS async_standbys`,
  );
}

interface BackendKeyClient {
  readonly processID: number | null;
  query(text: string): Promise<{ rows: { pid: number }[] }>;
}

interface PooledClients {
  readonly idleCount: number;
  connect(): Promise<BackendKeyClient & { release(): void }>;
}

// PgBouncer (and Supavisor, Odyssey, PgCat, RDS Proxy) answer the client's startup themselves and
// announce a backend key of their own, so node-postgres's `processID` (from BackendKeyData) is not
// the pid of the backend that runs the statements. A plain TCP proxy passes the key through. Only
// node-postgres exposes the announced key; other drivers give `undefined` (not known).
async function announcedAndActualPid(
  db: AnyPgDatabase,
): Promise<{ announced: number; actual: number } | undefined> {
  const client = (db as unknown as { $client?: unknown }).$client;
  if (typeof client !== 'object' || client === null) return undefined;
  const read = async (on: BackendKeyClient) => {
    const { rows } = await on.query('SELECT pg_backend_pid() AS pid');
    const actual = rows[0]?.pid;
    return typeof on.processID === 'number' && typeof actual === 'number'
      ? { announced: on.processID, actual }
      : undefined;
  };
  if ('idleCount' in client && typeof (client as PooledClients).connect === 'function') {
    const checkedOut = await (client as PooledClients).connect();
    try {
      return await read(checkedOut);
    } finally {
      checkedOut.release();
    }
  }
  return 'processID' in client ? read(client as BackendKeyClient) : undefined;
}

// A store told `prepare: false` is behind a transaction pooler, or its operator thinks so. Over
// postgres-js that reaches only the store's own statements: the client still sends each
// transaction's COMMIT as a named statement. Behind the pooler the COMMIT can land on a server
// connection that never parsed it; the refusal aborts the transaction, postgres-js sends the
// COMMIT again unnamed, and PostgreSQL answers a COMMIT of an aborted transaction with ROLLBACK and
// no error: the migrations, or a handler's writes with their stored answer, are gone while every
// call reported success.
function postgresJsNamingUnderUnnamedStore(
  db: AnyPgDatabase,
  options: PgDeploymentOptions,
): DeploymentFinding | undefined {
  if (options.prepare !== false) return undefined;
  const client = (db as unknown as { $client?: unknown }).$client;
  if (typeof client !== 'function') return undefined;
  const clientOptions = (client as { options?: { prepare?: unknown } }).options;
  if (clientOptions?.prepare !== true) return undefined;
  return {
    level: DeploymentLevel.warn,
    code: DeploymentCode.pooler,
    message:
      "the store sends its statements unnamed (prepare: false), but its postgres-js client names its own, a transaction's COMMIT among them: behind a transaction pooler a COMMIT refused by name is sent again after the refusal aborted the transaction, and the transaction is rolled back without an error (a handler's writes and their stored answer, or the migrations, lost).",
    fix: 'create the client with postgres(url, { prepare: false })',
  };
}

/**
 * Reads what the PostgreSQL server says about the store's deployment, without writing, and lists
 * what loses answers or can lose them:
 *
 * - refuses a keys table that is UNLOGGED or temporary (`pg_class.relpersistence`);
 * - warns when `synchronous_commit` is `local` or `off` on this connection, when the server streams
 *   to physical standbys that confirm no commit (`synchronous_standby_names` empty, or a
 *   `pg_stat_replication.sync_state` of `async`), when the connection is to a standby
 *   (`pg_is_in_recovery()`), and, with named statements, when a pooler is detected (over
 *   node-postgres only: the backend key the connection announced is not `pg_backend_pid()`), and
 *   when a store with `prepare: false` runs on a postgres-js client that names its statements.
 *
 * A missing keys table is no finding: the migrations create it permanent. Reading
 * `pg_stat_replication`'s `sync_state` needs `pg_monitor` (or `pg_read_all_stats`); without it only
 * an empty `synchronous_standby_names` with standbys attached is seen.
 *
 * @param db - a drizzle PostgreSQL database
 * @param options - the keys table and the store's `prepare`
 * @example
 * ```ts
 * const report = await checkPgDeployment(db, { schema: 'idempotency' });
 * for (const finding of report.findings) console.warn(finding.code, finding.message, finding.fix);
 * ```
 */
export async function checkPgDeployment(
  db: AnyPgDatabase,
  options: PgDeploymentOptions = {},
): Promise<DeploymentReport> {
  const { schema, name } = resolvePgTable(options);
  const [facts] = await serverFacts(db, schema, name);
  const findings: DeploymentFinding[] = [];
  if (facts === undefined) return deploymentReport('pg', findings);
  const persistence =
    facts.persistence === null
      ? undefined
      : keysTablePersistenceFinding(schema, name, facts.persistence);
  if (persistence !== undefined) findings.push(persistence);
  const commit = facts.synchronous_commit;
  if (!DURABLE_COMMIT.includes(commit)) {
    findings.push({
      level: DeploymentLevel.warn,
      code: DeploymentCode.synchronousCommit,
      message:
        commit === 'off'
          ? 'synchronous_commit is off: a commit is acknowledged before it is flushed, so answers stored in the last moments before a server crash are lost (5 at a kill -9 here) and their retries run the effect again.'
          : 'synchronous_commit is local: a commit is acknowledged before any standby has it, so a failover loses the answers the standby had not received and their retries run the effect again.',
      fix: "synchronous_commit = on (or remote_apply): ALTER ROLE or ALTER DATABASE … SET synchronous_commit = 'on', or options=-c synchronous_commit=on in the connection string",
    });
  }
  const standbys = Number(facts.standbys);
  const asynchronous = facts.standby_names.trim() === '' ? standbys : Number(facts.async_standbys);
  if (asynchronous > 0) {
    findings.push({
      level: DeploymentLevel.warn,
      code: DeploymentCode.asynchronousStandby,
      message: `${asynchronous} of ${standbys} standbys confirm no commit (asynchronous replication): a failover to one of them loses the answers it had not received yet, and their retries run the effect again (21-28 answers lost and 27-32 effects run twice per 3,000 keys with 20 ms of lag, measured here).`,
      fix: "synchronous_standby_names = 'ANY 1 (…)' (or '*') with synchronous_commit = on or remote_apply, and fail over only to a synchronous standby",
    });
  }
  if (facts.in_recovery) {
    findings.push({
      level: DeploymentLevel.warn,
      code: DeploymentCode.standbyConnection,
      message:
        'the connection is to a standby in recovery: every write of the store fails, and answers read there lag the primary, so a finished request can read as missing or in progress.',
      fix: 'connect the store to the primary, e.g. target_session_attrs=read-write in the connection string',
    });
  }
  const namingClient = postgresJsNamingUnderUnnamedStore(db, options);
  if (namingClient !== undefined) findings.push(namingClient);
  if (options.prepare ?? true) {
    const pids = await announcedAndActualPid(db);
    if (pids !== undefined && pids.announced !== pids.actual) {
      findings.push({
        level: DeploymentLevel.warn,
        code: DeploymentCode.pooler,
        message: `a connection pooler sits between the store and PostgreSQL (the connection announced backend ${pids.announced}, statements run on backend ${pids.actual}): named prepared statements cannot be kept across its server connections. Nothing is lost (a statement refused by name is sent again unnamed, and the store then names none), but the first refusals cost a round trip each.`,
        fix: 'prepare: false on the store (openPgStore, PgIdempotencyStore, or --no-prepare for idem)',
      });
    }
  }
  return deploymentReport('pg', findings);
}
