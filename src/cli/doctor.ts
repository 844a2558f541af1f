import { existsSync } from 'node:fs';
import { type Command, Option } from 'commander';
import {
  type DeploymentFinding,
  DeploymentLevel,
  type DeploymentReport,
} from '../core/deployment.js';
import type { SealingReport } from '../core/erasure.js';
import { DatabaseOpenError } from '../core/errors.js';
import { KeyStore, type Mode } from '../core/key-store.js';
import { type CliIo, writeJson } from './io.js';
import { KEYRING_VARIABLE } from './keyring.js';
import { describeLocation, type LocationFlags, type StoreLocation } from './location.js';
import { cliMysqlPool, withStore } from './open-store.js';

/** Exit codes of `idem doctor`. */
const DoctorExitCode = {
  /** Nothing found. */
  ok: 0,
  /** A refusal: the deployment loses answers (also any runtime error, as for every command). */
  refused: 1,
  /** Warnings only: answers can be lost in a failure. */
  warnings: 3,
} as const;

/** The flags of `idem doctor`. */
interface DoctorOptions {
  readonly location: StoreLocation;
  readonly json?: boolean;
}

// Node reports a refused connection to a name with several addresses as an AggregateError
// whose own message is empty: take the first attempt's message instead.
function reason(error: unknown): string {
  if (!(error instanceof Error)) return String(error);
  if (error.message !== '') return error.message;
  const [first] = error instanceof AggregateError ? error.errors : [];
  return first instanceof Error ? first.message : error.name;
}

function cannotConnect(location: StoreLocation, error: unknown): DatabaseOpenError {
  return new DatabaseOpenError(
    `cannot connect to ${describeLocation(location)}: ${reason(error)}`,
    error,
  );
}

async function checkSqlite(
  location: Extract<StoreLocation, { dialect: 'sqlite' }>,
): Promise<DeploymentReport> {
  if (location.path !== ':memory:' && !existsSync(location.path)) {
    throw new DatabaseOpenError(`no database at ${location.path}`);
  }
  // Loaded here so that PostgreSQL users need not install `better-sqlite3`.
  const [{ default: Database }, { checkSqliteDeployment }] = await Promise.all([
    import('better-sqlite3'),
    import('../sqlite/deployment.js'),
  ]);
  let client: InstanceType<typeof Database>;
  try {
    client = new Database(location.path, { readonly: location.path !== ':memory:' });
  } catch (error) {
    throw new DatabaseOpenError(`cannot open ${location.path}: ${reason(error)}`, error);
  }
  try {
    return checkSqliteDeployment(client);
  } finally {
    client.close();
  }
}

async function checkPg(
  location: Extract<StoreLocation, { dialect: 'pg' }>,
): Promise<DeploymentReport> {
  const [{ default: pg }, { drizzle }, { checkPgDeployment }, { pgKeysTable }] = await Promise.all([
    import('pg'),
    import('drizzle-orm/node-postgres'),
    import('../pg/deployment.js'),
    import('../pg/schema.js'),
  ]);
  const pool = new pg.Pool({ connectionString: location.url, max: 1 });
  pool.on('error', () => undefined);
  try {
    try {
      await pool.query('SELECT 1');
    } catch (error) {
      throw cannotConnect(location, error);
    }
    return await checkPgDeployment(drizzle({ client: pool }), {
      table: pgKeysTable(location.table, { schema: location.schema }),
      prepare: location.prepare !== false,
    });
  } finally {
    await pool.end();
  }
}

async function checkMysql(
  location: Extract<StoreLocation, { dialect: 'mysql' }>,
): Promise<DeploymentReport> {
  const [{ default: mysql }, { drizzle }, { checkMysqlDeployment }] = await Promise.all([
    import('mysql2/promise'),
    import('drizzle-orm/mysql2'),
    import('../mysql/deployment.js'),
  ]);
  const pool = cliMysqlPool(mysql, location);
  try {
    try {
      await pool.query('SELECT 1');
    } catch (error) {
      throw cannotConnect(location, error);
    }
    return await checkMysqlDeployment(drizzle({ client: pool }));
  } finally {
    await pool.end();
  }
}

/**
 * Runs the deployment check on the store at `location`, reading only (no migration, no write):
 * `checkSqliteDeployment`, `checkPgDeployment` or `checkMysqlDeployment`.
 *
 * @param location - the store to check
 * @throws {@link DatabaseOpenError} when the store cannot be reached
 */
function checkLocation(location: StoreLocation): Promise<DeploymentReport> {
  if (location.dialect === 'sqlite') return checkSqlite(location);
  return location.dialect === 'pg' ? checkPg(location) : checkMysql(location);
}

function plural(count: number, word: string): string {
  return `${count} ${word}${count === 1 ? '' : 's'}`;
}

function writeFindings(io: CliIo, where: string, findings: readonly DeploymentFinding[]): void {
  const refusals = findings.filter((finding) => finding.level === DeploymentLevel.refuse).length;
  if (findings.length === 0) {
    io.stdout.write(`${where}: ok, nothing found that loses answers\n`);
    return;
  }
  const lines = [
    `${where}: ${plural(refusals, 'refusal')}, ${plural(findings.length - refusals, 'warning')}`,
  ];
  for (const finding of findings) {
    lines.push(`${finding.level} ${finding.code}: ${finding.message}`, `  fix: ${finding.fix}`);
  }
  io.stdout.write(`${lines.join('\n')}\n`);
}

/**
 * `idem doctor`: the deployment check, printed (or one line of JSON with `--json`). Resolves with
 * the exit code, see {@link DoctorExitCode}.
 */
async function doctorCommand(io: CliIo, options: DoctorOptions): Promise<number> {
  const report = await checkLocation(options.location);
  const where = describeLocation(options.location);
  const sealing = await sealingOf(options.location);
  if (options.json) writeJson(io.stdout, { location: where, ...report, sealing });
  else {
    writeFindings(io, where, report.findings);
    if (sealing !== null) io.stdout.write(`${describeSealing(sealing)}\n`);
  }
  if (report.findings.some((finding) => finding.level === DeploymentLevel.refuse)) {
    return DoctorExitCode.refused;
  }
  const unsealed =
    sealing !== null &&
    (sealing.missing.length > 0 ||
      sealing.retired.length > 0 ||
      (sealing.current !== null && sealing.plaintext > 0));
  return report.findings.length > 0 || unsealed ? DoctorExitCode.warnings : DoctorExitCode.ok;
}

// How the answers are kept, read with the keyring of IDEM_ENCRYPTION_KEYS; `null` when the store
// cannot be opened for reading (no table yet, an older version): the findings above say why.
async function sealingOf(location: StoreLocation): Promise<SealingReport | null> {
  try {
    return await withStore(location, 'read', async (store) =>
      store instanceof KeyStore ? (store as KeyStore<unknown, Mode>).sealingReport() : null,
    );
  } catch {
    return null;
  }
}

function describeSealing(report: SealingReport): string {
  const sealed = Object.entries(report.byKey).map(([id, count]) => {
    const state = report.missing.includes(id)
      ? 'NOT in the keyring: unreadable'
      : report.retired.includes(id)
        ? 'retired: run idem rekey'
        : 'current';
    return `${count} under key ${id} (${state})`;
  });
  const plain =
    report.current === null
      ? `${report.plaintext} in plain JSON (encryption is off: set ${KEYRING_VARIABLE})`
      : `${report.plaintext} in plain JSON${report.plaintext > 0 ? ' (run idem rekey)' : ''}`;
  return `answers: ${[plain, ...sealed].join(', ')}`;
}

/** What {@link registerDoctorCommand} needs from the program. */
export interface DoctorRegistration {
  readonly io: CliIo;
  readonly setExitCode: (code: number) => void;
  /** Adds the flags that locate a store (`--db`, `--url`, `--schema`, `--table`, `--no-prepare`). */
  readonly withLocation: (command: Command) => Command;
  /** Resolves those flags into a location. */
  readonly locate: (flags: LocationFlags) => StoreLocation;
}

/**
 * Adds `idem doctor` to `program`.
 *
 * @param program - the `idem` program
 * @param registration - the program's streams, exit code and location flags
 */
export function registerDoctorCommand(program: Command, registration: DoctorRegistration): void {
  const { io, setExitCode, withLocation, locate } = registration;
  withLocation(
    program
      .command('doctor')
      .description(
        'check the deployment for what loses answers (UNLOGGED table, synchronous_commit, asynchronous standbys, pooler, Galera, flush settings, SQLite journal); exit 0 ok, 1 refused, 3 warnings',
      ),
  )
    .addOption(new Option('--json', 'print one line of JSON'))
    .action(async (options) =>
      setExitCode(await doctorCommand(io, { ...options, location: locate(options) })),
    );
}
