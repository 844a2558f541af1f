import { type ChildProcess, spawn } from 'node:child_process';
import { chmodSync, existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { until } from './waiting.js';

const CANDIDATES = ['/usr/sbin/pgbouncer', '/usr/bin/pgbouncer', '/usr/local/bin/pgbouncer'];

/** The PgBouncer binary (Debian's package puts it in /usr/sbin), or `undefined` when missing. */
export function pgbouncerBinary(): string | undefined {
  const fromPath = (process.env.PATH ?? '')
    .split(':')
    .filter((dir) => dir !== '')
    .map((dir) => join(dir, 'pgbouncer'));
  return [...fromPath, ...CANDIDATES].find((path) => existsSync(path));
}

/** A free TCP port on the loopback interface. */
async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  await new Promise((resolve) => server.close(resolve));
  if (address === null || typeof address === 'string') throw new Error('no port was assigned');
  return address.port;
}

/** A PgBouncer of the test's own, in front of the real server. */
export interface Bouncer {
  /** The connection string of the pooled database (same user and database as the server's). */
  readonly url: string;
  /** Stops PgBouncer and removes its files. */
  stop(): Promise<void>;
}

/** Options of {@link startPgbouncer}. */
export interface BouncerOptions {
  /** `pool_mode`. Default `transaction`, what Supabase's and Neon's pooled endpoints run. */
  readonly poolMode?: 'transaction' | 'session';
  /** Server connections per user and database; small, so client connections share them. */
  readonly poolSize?: number;
}

/**
 * Starts PgBouncer on a free loopback port with a temporary configuration (trust
 * authentication, the given pool mode and size) pointing at the server `serverUrl` names, and
 * waits until a query goes through it. PgBouncer refuses to run as root: as root it runs as the
 * `postgres` user. It ends with the test process even when `stop()` is never reached.
 *
 * @param serverUrl - the real server, e.g. `postgres://postgres@127.0.0.1:5432/test`
 */
export async function startPgbouncer(
  serverUrl: string,
  options: BouncerOptions = {},
): Promise<Bouncer> {
  const binary = pgbouncerBinary();
  if (binary === undefined) throw new Error('pgbouncer is not installed');
  const server = new URL(serverUrl);
  const database = decodeURIComponent(server.pathname.slice(1)) || 'postgres';
  const user = decodeURIComponent(server.username) || 'postgres';
  const port = await freePort();
  const dir = mkdtempSync(join(tmpdir(), 'idem-pgbouncer-'));
  // Readable by the unprivileged user PgBouncer runs as.
  chmodSync(dir, 0o755);
  const config = join(dir, 'pgbouncer.ini');
  const users = join(dir, 'users.txt');
  writeFileSync(users, `"${user}" "${decodeURIComponent(server.password)}"\n`, { mode: 0o644 });
  writeFileSync(
    config,
    [
      '[databases]',
      `${database} = host=${server.hostname} port=${server.port || '5432'} dbname=${database}`,
      '[pgbouncer]',
      'listen_addr = 127.0.0.1',
      `listen_port = ${port}`,
      'unix_socket_dir =',
      'auth_type = trust',
      `auth_file = ${users}`,
      `pool_mode = ${options.poolMode ?? 'transaction'}`,
      `default_pool_size = ${options.poolSize ?? 2}`,
      'max_client_conn = 1000',
      'logfile =',
      'ignore_startup_parameters = extra_float_digits',
      '',
    ].join('\n'),
    { mode: 0o644 },
  );
  const asRoot = process.getuid?.() === 0;
  const command =
    asRoot && existsSync('/usr/bin/setpriv')
      ? [
          '/usr/bin/setpriv',
          '--reuid=postgres',
          '--regid=postgres',
          '--init-groups',
          binary,
          config,
        ]
      : [binary, config];
  // Through a shell that ends PgBouncer when its stdin closes, which happens however the test
  // process ends (even killed), so no PgBouncer outlives its test file; the shell itself ends
  // with PgBouncer, removing its files. An asynchronous list reads /dev/null unless given stdin
  // explicitly (fd 3).
  const child: ChildProcess = spawn(
    '/bin/sh',
    [
      '-c',
      'dir=$1; shift; exec 3<&0; "$@" & p=$!; (read _ <&3; kill $p 2>/dev/null) & wait $p; rm -rf "$dir"',
      'sh',
      dir,
      ...command,
    ],
    { stdio: ['pipe', 'ignore', 'pipe'] },
  );
  let log = '';
  child.stderr?.on('data', (chunk: Buffer) => {
    // Only the tail matters for a failure message; PgBouncer logs every connection.
    log = (log + chunk.toString()).slice(-4000);
  });
  let exited = false;
  const exit = new Promise<void>((resolve) =>
    child.once('exit', () => {
      exited = true;
      resolve();
    }),
  );
  const target = new URL(serverUrl);
  target.hostname = '127.0.0.1';
  target.port = String(port);
  const url = target.toString();
  const stop = async () => {
    child.stdin?.end();
    await exit;
    rmSync(dir, { recursive: true, force: true });
  };
  try {
    await until(async () => {
      if (exited) throw new Error(`pgbouncer exited at start:\n${log}`);
      const client = new pg.Client({ connectionString: url });
      try {
        await client.connect();
        await client.query('SELECT 1');
        return true;
      } catch {
        return false;
      } finally {
        await client.end().catch(() => undefined);
      }
    }, 50);
  } catch (error) {
    await stop();
    throw error;
  }
  return { url, stop };
}
