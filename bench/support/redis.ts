import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/** What a benchmark Redis keeps on disk: nothing, or an append-only file synced as named. */
export type RedisDurability = 'none' | 'everysec' | 'always';

/** A redis-server started by the benchmark, with its own port and directory. */
export interface BenchRedis {
  readonly url: string;
  readonly durability: RedisDurability;
  /** CPU seconds (user and system, all threads) the server has used since it started. */
  cpuSeconds(): number;
  /** Stops the server and removes its directory. */
  stop(): Promise<void>;
}

// Linux's clock ticks per second for the times in /proc/<pid>/stat (`getconf CLK_TCK`).
const TICKS_PER_SECOND = 100;

// utime and stime of a process, fields 14 and 15 of /proc/<pid>/stat, counted after the command
// name (field 2), which is in parentheses and may itself hold spaces.
function processCpuSeconds(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(fields[11]) + Number(fields[12])) / TICKS_PER_SECOND;
}

async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  await new Promise<void>((resolve) => server.close(() => resolve()));
  if (address === null || typeof address === 'string') throw new Error('no port');
  return address.port;
}

/**
 * Starts `redis-server` (from PATH) on a free loopback port with its own temporary directory, no
 * snapshots, and the append-only file off (`none`) or on with `appendfsync` set to `durability`.
 */
export async function startRedis(durability: RedisDurability): Promise<BenchRedis> {
  const port = await freePort();
  const dir = mkdtempSync(join(tmpdir(), 'idem-bench-redis-'));
  const aof =
    durability === 'none'
      ? ['--appendonly', 'no']
      : ['--appendonly', 'yes', '--appendfsync', durability];
  const server = spawn('redis-server', [
    '--port',
    String(port),
    '--bind',
    '127.0.0.1',
    '--dir',
    dir,
    '--save',
    '',
    ...aof,
  ]);
  let output = '';
  const exited = new Promise<void>((resolve) => server.on('exit', () => resolve()));
  await new Promise<void>((resolve, reject) => {
    server.on('error', reject);
    server.on('exit', (code) => reject(new Error(`redis-server exited with ${code}: ${output}`)));
    server.stdout.on('data', (chunk: Buffer) => {
      output += chunk.toString();
      if (output.includes('Ready to accept connections')) resolve();
    });
  });
  return {
    url: `redis://127.0.0.1:${port}`,
    durability,
    cpuSeconds: () => processCpuSeconds(server.pid as number),
    async stop() {
      server.kill('SIGTERM');
      await exited;
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
