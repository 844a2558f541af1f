import { execFile } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { appendFile, chown, mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import pg from 'pg';
import { until } from './waiting.js';

const run = promisify(execFile);

/** Where Debian puts the PostgreSQL 15 server binaries (`initdb`, `pg_ctl`, `pg_basebackup`). */
const PG_BIN = process.env.PG_BIN ?? '/usr/lib/postgresql/15/bin';

/**
 * Why a throwaway cluster cannot be made here, or `undefined` when it can. Under CI the caller
 * fails on a reason instead of skipping: `.ci/run` provides the binaries.
 */
export function clusterUnavailable(): string | undefined {
  for (const tool of ['initdb', 'pg_ctl', 'pg_basebackup']) {
    if (!existsSync(join(PG_BIN, tool))) return `${join(PG_BIN, tool)} is missing`;
  }
  return undefined;
}

/** A port nobody listens on at the moment of asking. */
export async function freePort(): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as net.AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

/**
 * PostgreSQL refuses to run as root: as root, every server tool runs as the `postgres` user, from
 * `/`, since the checkout it is called from may be a directory that user cannot enter (every path
 * given to the tools is absolute).
 */
async function pgTool(tool: string, args: string[]): Promise<string> {
  const binary = join(PG_BIN, tool);
  const asRoot = process.getuid?.() === 0;
  const { stdout } = asRoot
    ? await run('runuser', ['-u', 'postgres', '--', binary, ...args], { cwd: '/' })
    : await run(binary, args);
  return stdout;
}

/** One server of the cluster. */
interface PgNode {
  readonly port: number;
  readonly dataDir: string;
  /** A connection string to its `postgres` database. */
  readonly url: string;
  /** The postmaster's pid, read from `postmaster.pid`. */
  pid(): Promise<number>;
  /**
   * SIGKILL to the postmaster and every process it started, as a crash of the server, then waits
   * until they are gone and the port refuses connections.
   */
  kill(): Promise<void>;
  /** `pg_ctl promote`, then waits until it accepts writes. */
  promote(): Promise<void>;
}

/** A primary and one streaming standby in a temporary directory. */
export interface PgCluster {
  readonly primary: PgNode;
  readonly standby: PgNode;
  /** Waits until the primary sees the standby stream in the mode the cluster was made with. */
  streaming(): Promise<void>;
  /** The last lines of both servers' logs, for a failed test to print. */
  logTail(): Promise<string>;
  /** Stops what still runs and deletes the directory. */
  close(): Promise<void>;
}

/** How {@link startPgCluster} replicates. */
export interface PgClusterOptions {
  /** `synchronous_standby_names = '*'`: a commit waits for the standby. */
  readonly synchronous: boolean;
  /**
   * A delay added to every byte the primary sends the standby, through a proxy on loopback, so an
   * asynchronous standby lags as one across a network does. Default 0: no proxy.
   */
  readonly lagMs?: number;
}

/**
 * A TCP proxy that holds every chunk from `target` for `lagMs` before passing it on, keeping the
 * order: the standby's replication connection goes through it.
 */
async function lagProxy(target: number, lagMs: number): Promise<{ port: number; close(): void }> {
  const sockets = new Set<net.Socket>();
  const server = net.createServer((client) => {
    const upstream = net.connect(target, '127.0.0.1');
    sockets.add(client).add(upstream);
    client.pipe(upstream);
    // One queue drained in order by one timer: a timer per chunk could fire out of order (two
    // chunks of one turn whose delays were rounded apart), reordering the WAL stream, which the
    // standby then took for a corrupt record and stopped streaming.
    const queue: { chunk: Buffer; due: number }[] = [];
    let timer: NodeJS.Timeout | undefined;
    const drain = () => {
      timer = undefined;
      const now = Date.now();
      for (let next = queue[0]; next !== undefined && next.due <= now; next = queue[0]) {
        queue.shift();
        if (client.writable) client.write(next.chunk);
      }
      const head = queue[0];
      if (head !== undefined) timer = setTimeout(drain, head.due - now);
    };
    upstream.on('data', (chunk: Buffer) => {
      // Each chunk leaves `lagMs` after it came, behind every chunk that came before it.
      queue.push({ chunk, due: Date.now() + lagMs });
      timer ??= setTimeout(drain, lagMs);
    });
    const end = () => {
      if (timer !== undefined) clearTimeout(timer);
      client.destroy();
      upstream.destroy();
    };
    client.on('error', end).on('close', end);
    upstream.on('error', end).on('close', end);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as net.AddressInfo;
  return {
    port,
    close() {
      for (const socket of sockets) socket.destroy();
      server.close();
    },
  };
}

async function accepts(url: string, sql = 'SELECT 1'): Promise<boolean> {
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 2000 });
  client.on('error', () => undefined);
  try {
    await client.connect();
    await client.query(sql);
    return true;
  } catch {
    return false;
  } finally {
    await client.end().catch(() => undefined);
  }
}

// The pids whose parent is `parent`, read from /proc.
async function childrenOf(parent: number): Promise<number[]> {
  const children: number[] = [];
  for (const entry of await readdir('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    const stat = await readFile(`/proc/${entry}/stat`, 'utf8').catch(() => '');
    // The fields after the command, which may hold spaces and parentheses: state, then ppid.
    const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
    if (ppid === parent) children.push(Number(entry));
  }
  return children;
}

// Sends `name` to `pid`, which may have exited already.
function signal(pid: number, name: NodeJS.Signals): void {
  try {
    process.kill(pid, name);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ESRCH') throw error;
  }
}

// Whether `pid` still runs (a zombie waiting for its parent counts as gone).
function alive(pid: number): boolean {
  const stat = (() => {
    try {
      return readFileSync(`/proc/${pid}/stat`, 'utf8');
    } catch {
      return '';
    }
  })();
  return stat !== '' && stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3) !== 'Z';
}

// The last `lines` lines of the log `pg_ctl -l` writes beside a server's data directory.
async function serverLog(dataDir: string, lines: number): Promise<string> {
  const text = await readFile(`${dataDir}.log`, 'utf8').catch(() => '');
  return `${dataDir}.log:\n${text.split('\n').slice(-lines).join('\n')}`;
}

function node(dataDir: string, port: number): PgNode {
  const url = `postgres://postgres@127.0.0.1:${port}/postgres`;
  const pid = async () => {
    const text = await readFile(join(dataDir, 'postmaster.pid'), 'utf8');
    return Number(text.split('\n')[0]);
  };
  return {
    port,
    dataDir,
    url,
    pid,
    async kill() {
      // The backends too: a backend outlives a killed postmaster until it notices, and meanwhile
      // still answers the pooled connection it serves, which a crashed server would not.
      const postmaster = await pid();
      const processes = [postmaster, ...(await childrenOf(postmaster))];
      for (const each of processes) signal(each, 'SIGKILL');
      await until(async () => processes.every((each) => !alive(each)), 50);
      await until(async () => !(await accepts(url)), 50);
    },
    async promote() {
      await pgTool('pg_ctl', ['-D', dataDir, '-w', 'promote']);
      await until(() => accepts(url, 'CREATE TEMP TABLE promoted_probe (x int)'), 50);
    },
  };
}

// A port from freePort() is free when asked, not when the server binds it: a client socket of a
// test running beside this one can take it meanwhile, and the server then exits at once. So a
// start that fails is tried again on a new port (the last `port` line of the configuration wins),
// and the last failure says what the server logged.
async function startOnFreePort(dataDir: string): Promise<number> {
  let failure: Error | undefined;
  for (let attempt = 0; attempt < 3; attempt++) {
    const port = await freePort();
    await appendFile(join(dataDir, 'postgresql.conf'), `port = ${port}\n`);
    try {
      await pgTool('pg_ctl', ['-D', dataDir, '-l', `${dataDir}.log`, '-w', 'start']);
      return port;
    } catch (error) {
      failure = new Error(
        `${dataDir} did not start on port ${port}: ${await serverLog(dataDir, 20)}`,
        {
          cause: error,
        },
      );
    }
  }
  throw failure;
}

/**
 * Makes a primary (`initdb`) and a standby (`pg_basebackup -R`) on free loopback ports in a new
 * temporary directory, starts both and waits until the standby streams (and, when synchronous, is
 * the synchronous one), so every commit after this returns is covered by the chosen mode.
 */
export async function startPgCluster(options: PgClusterOptions): Promise<PgCluster> {
  const dir = await mkdtemp(join(tmpdir(), 'idem-pgcluster-'));
  if (process.getuid?.() === 0) await chown(dir, ...(await postgresIds()));
  const [primaryDir, standbyDir] = [join(dir, 'primary'), join(dir, 'standby')];
  let proxy: { port: number; close(): void } | undefined;
  const close = async () => {
    proxy?.close();
    for (const dataDir of [standbyDir, primaryDir]) {
      if (existsSync(join(dataDir, 'postmaster.pid'))) {
        await pgTool('pg_ctl', ['-D', dataDir, '-m', 'immediate', 'stop']).catch(() => undefined);
      }
    }
    await rm(dir, { recursive: true, force: true });
  };
  try {
    await pgTool('initdb', ['-D', primaryDir, '-A', 'trust', '-U', 'postgres', '--no-sync']);
    await appendFile(
      join(primaryDir, 'postgresql.conf'),
      [
        "listen_addresses = '127.0.0.1'",
        `unix_socket_directories = '${dir}'`,
        'wal_level = replica',
        'max_wal_senders = 4',
        'shared_buffers = 32MB',
        'fsync = on',
        `synchronous_standby_names = '${options.synchronous ? '*' : ''}'`,
        '',
      ].join('\n'),
    );
    await appendFile(join(primaryDir, 'pg_hba.conf'), 'host replication all 127.0.0.1/32 trust\n');
    const primaryPort = await startOnFreePort(primaryDir);
    const primary = node(primaryDir, primaryPort);
    await pgTool('pg_basebackup', [
      ...['-h', '127.0.0.1', '-p', String(primaryPort), '-U', 'postgres'],
      ...['-D', standbyDir, '-R', '-X', 'stream'],
    ]);
    if (options.lagMs) proxy = await lagProxy(primaryPort, options.lagMs);
    const upstream = proxy?.port ?? primaryPort;
    await writeFile(
      join(standbyDir, 'postgresql.auto.conf'),
      `primary_conninfo = 'host=127.0.0.1 port=${upstream} user=postgres application_name=standby'\n`,
    );
    await appendFile(join(standbyDir, 'postgresql.conf'), "synchronous_standby_names = ''\n");
    const standby = node(standbyDir, await startOnFreePort(standbyDir));
    const wanted = options.synchronous ? 'sync' : 'async';
    const streaming = () =>
      until(async () => {
        const client = new pg.Client({ connectionString: primary.url });
        await client.connect();
        try {
          const { rows } = await client.query<{ sync_state: string; state: string }>(
            'SELECT sync_state, state FROM pg_stat_replication',
          );
          return rows.some((row) => row.state === 'streaming' && row.sync_state === wanted);
        } finally {
          await client.end();
        }
      }, 100);
    const logTail = async () => {
      const tails = [primaryDir, standbyDir].map((dataDir) => serverLog(dataDir, 40));
      return (await Promise.all(tails)).join('\n');
    };
    await streaming();
    return { primary, standby, streaming, logTail, close };
  } catch (error) {
    await close();
    throw error;
  }
}

async function postgresIds(): Promise<[number, number]> {
  const [{ stdout: uid }, { stdout: gid }] = await Promise.all([
    run('id', ['-u', 'postgres']),
    run('id', ['-g', 'postgres']),
  ]);
  return [Number(uid.trim()), Number(gid.trim())];
}
