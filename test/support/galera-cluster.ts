import { type ChildProcess, execFile, spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { chown, mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import mysql from 'mysql2/promise';
import { freePort } from './pg-cluster.js';
import { until } from './waiting.js';

const run = promisify(execFile);

/** Debian's galera-4 provider library. */
const GALERA_PROVIDER = '/usr/lib/galera/libgalera_smm.so';
const MARIADBD = '/usr/sbin/mariadbd';
const INSTALL_DB = '/usr/bin/mariadb-install-db';

/**
 * Why a throwaway Galera cluster cannot be made here, or `undefined` when it can. `.ci/run`
 * installs `galera-4` and `rsync`, and the caller fails rather than skips under CI.
 */
export function galeraUnavailable(): string | undefined {
  for (const file of [GALERA_PROVIDER, MARIADBD, INSTALL_DB, '/usr/bin/rsync']) {
    if (!existsSync(file)) return `${file} is missing`;
  }
  return undefined;
}

/** One node of the cluster. */
interface GaleraNode {
  readonly port: number;
  /** A mysql2 connection string to `database` on this node, as root. */
  url(database: string): string;
}

/** Three MariaDB Galera nodes on loopback, each with its own data directory and ports. */
export interface GaleraCluster {
  readonly nodes: readonly GaleraNode[];
  /** Creates a database (replicated to every node) and returns its name. */
  createDatabase(name: string): Promise<void>;
  /** Stops every node and deletes the directory. */
  close(): Promise<void>;
}

async function mysqlIds(): Promise<[number, number]> {
  const [{ stdout: uid }, { stdout: gid }] = await Promise.all([
    run('id', ['-u', 'mysql']),
    run('id', ['-g', 'mysql']),
  ]);
  return [Number(uid.trim()), Number(gid.trim())];
}

async function clusterSize(port: number): Promise<number> {
  const connection = await mysql.createConnection({ host: '127.0.0.1', port, user: 'root' });
  try {
    const [rows] = await connection.query("SHOW STATUS LIKE 'wsrep_cluster_size'");
    return Number((rows as { Value: string }[])[0]?.Value ?? 0);
  } finally {
    await connection.end();
  }
}

async function answers(port: number): Promise<boolean> {
  try {
    return (await clusterSize(port)) > 0;
  } catch {
    return false;
  }
}

/**
 * Makes a three-node Galera cluster in a new temporary directory: the first node bootstraps
 * (`--wsrep-new-cluster`), the others join it by state transfer (rsync); returns once all three
 * report a cluster of three.
 */
export async function startGaleraCluster(): Promise<GaleraCluster> {
  const dir = await mkdtemp(join(tmpdir(), 'idem-galera-'));
  const asRoot = process.getuid?.() === 0;
  const ids = asRoot ? await mysqlIds() : undefined;
  const ports = await Promise.all(
    Array.from({ length: 3 }, async () => ({
      sql: await freePort(),
      group: await freePort(),
      ist: await freePort(),
      sst: await freePort(),
    })),
  );
  const cluster = ports.map((port) => `127.0.0.1:${port.group}`).join(',');
  const processes: ChildProcess[] = [];
  const close = async () => {
    for (const child of processes) child.kill('SIGKILL');
    await Promise.all(
      processes.map(
        (child) =>
          new Promise<void>((resolve) => {
            if (child.exitCode !== null || child.signalCode !== null) resolve();
            else child.once('exit', () => resolve());
          }),
      ),
    );
    await rm(dir, { recursive: true, force: true });
  };
  try {
    if (ids) await chown(dir, ...ids);
    const configs = await Promise.all(
      ports.map(async (port, index) => {
        const name = `n${index + 1}`;
        const dataDir = join(dir, name);
        await mkdir(dataDir);
        if (ids) await chown(dataDir, ...ids);
        const config = join(dir, `${name}.cnf`);
        await writeFile(
          config,
          [
            '[mysqld]',
            `datadir=${dataDir}`,
            `port=${port.sql}`,
            `socket=${join(dir, `${name}.sock`)}`,
            `pid-file=${join(dir, `${name}.pid`)}`,
            `log-error=${join(dir, `${name}.err`)}`,
            'bind-address=127.0.0.1',
            'skip-name-resolve',
            'binlog_format=ROW',
            'default_storage_engine=InnoDB',
            'innodb_autoinc_lock_mode=2',
            'innodb_buffer_pool_size=64M',
            'innodb_log_file_size=16M',
            'wsrep_on=ON',
            `wsrep_provider=${GALERA_PROVIDER}`,
            `wsrep_cluster_address=gcomm://${cluster}`,
            'wsrep_cluster_name=idempotency-test',
            `wsrep_node_name=${name}`,
            `wsrep_node_address=127.0.0.1:${port.group}`,
            `wsrep_provider_options="gmcast.listen_addr=tcp://127.0.0.1:${port.group};ist.recv_addr=127.0.0.1:${port.ist};gcache.size=32M"`,
            'wsrep_sst_method=rsync',
            `wsrep_sst_receive_address=127.0.0.1:${port.sst}`,
            '',
          ].join('\n'),
        );
        return config;
      }),
    );
    const [first] = configs;
    if (first === undefined) throw new Error('no node configured');
    await run(INSTALL_DB, [
      `--defaults-file=${first}`,
      ...(ids ? ['--user=mysql'] : []),
      '--auth-root-authentication-method=normal',
      '--skip-test-db',
    ]);
    if (ids) await run('chown', ['-R', 'mysql:mysql', dir]);
    const start = (config: string, bootstrap: boolean) => {
      const child = spawn(
        MARIADBD,
        [
          `--defaults-file=${config}`,
          ...(ids ? ['--user=mysql'] : []),
          ...(bootstrap ? ['--wsrep-new-cluster'] : []),
        ],
        { stdio: 'ignore' },
      );
      processes.push(child);
    };
    // Joiners come one at a time: each takes a full state transfer from a member.
    for (const [index, config] of configs.entries()) {
      start(config, index === 0);
      const port = ports[index]?.sql as number;
      await until(() => answers(port), 200);
    }
    await until(async () => {
      const sizes = await Promise.all(ports.map((port) => clusterSize(port.sql)));
      return sizes.every((size) => size === 3);
    }, 200);
    const nodes = ports.map((port) => ({
      port: port.sql,
      url: (database: string) => `mysql://root@127.0.0.1:${port.sql}/${database}`,
    }));
    return {
      nodes,
      async createDatabase(name) {
        const connection = await mysql.createConnection({
          host: '127.0.0.1',
          port: ports[0]?.sql,
          user: 'root',
        });
        try {
          await connection.query(`CREATE DATABASE \`${name}\``);
        } finally {
          await connection.end();
        }
      },
      close,
    };
  } catch (error) {
    await close();
    throw error;
  }
}
