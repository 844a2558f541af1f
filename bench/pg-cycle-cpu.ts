// Where the CPU of a PostgreSQL request cycle goes: `npx tsx bench/pg-cycle-cpu.ts [cycles]`.
// Runs the shipped request path at 32 in flight on the store with and without `batch: true` (a
// pool of 8), and node-idempotency on a memory-only Redis, three blocks each, and prints per cycle
// the CPU time of this Node process and of the server's processes (every `postgres` or
// `redis-server` process, from /proc). CPU time, not wall time: what the two cores must supply
// per cycle, which bounds the cycles per second on a machine where client and server share them.
import { readdirSync, readFileSync } from 'node:fs';
import { layerCycle, nodeIdempotencyCycle } from './peers.js';
import { type Cycle, cyclesPerSecond } from './support/cycles.js';
import { benchPool, createBenchDatabase } from './support/pg-database.js';
import { startRedis } from './support/redis.js';
import { shippedPg } from './support/shipped.js';

// Linux counts process CPU time in clock ticks of 10 ms (USER_HZ 100).
const MICROS_PER_TICK = 10_000;

// The CPU ticks (user and system) of every process whose command starts with `name`; a process
// that ends while it is read is left out.
function serverTicks(name: string): number {
  let sum = 0;
  for (const pid of readdirSync('/proc').filter((entry) => /^\d+$/.test(entry))) {
    let stat: string;
    try {
      stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    } catch {
      continue;
    }
    const command = stat.slice(stat.indexOf('(') + 1, stat.lastIndexOf(')'));
    if (!command.startsWith(name)) continue;
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    sum += Number(fields[11]) + Number(fields[12]);
  }
  return sum;
}

async function measure(label: string, cycle: Cycle, server: string, count: number) {
  await cyclesPerSecond(cycle, 1000, 32);
  for (let block = 0; block < 3; block++) {
    const node = process.cpuUsage();
    const before = serverTicks(server);
    const perSecond = await cyclesPerSecond(cycle, count, 32);
    const used = process.cpuUsage(node);
    const serverMicros = ((serverTicks(server) - before) * MICROS_PER_TICK) / count;
    console.log(
      `${label}: ${perSecond.toFixed(0)} cycles/s, Node ${((used.user + used.system) / count).toFixed(1)} µs a cycle, ${server} ${serverMicros.toFixed(1)} µs`,
    );
  }
}

const count = Number(process.argv[2] ?? 6000);
const database = await createBenchDatabase('report_pgcpu');
const pool = benchPool(database.url, 8);
const redis = await startRedis('none');
const batching = layerCycle(await shippedPg.openPgStore(pool, { batch: true }));
const plain = layerCycle(await shippedPg.openPgStore(pool));
const peer = await nodeIdempotencyCycle(redis.url);
try {
  await measure('PostgreSQL, batch: true', batching.cycle, 'postgres', count);
  await measure('PostgreSQL, plain', plain.cycle, 'postgres', count / 2);
  await measure('node-idempotency on Redis', peer.cycle, 'redis-server', count);
} finally {
  await batching.close();
  await plain.close();
  await peer.close();
  await redis.stop();
  await pool.end();
  await database.drop();
}
