// Child process: reserves a new key every `intervalMs` on the store at argv[2] until the file
// argv[4] exists, then prints each reserve's scheduled start (epoch ms) and its latency measured
// from that scheduled start, so a reserve held up by a lock also delays, and counts, the ones
// queued behind it.
import { existsSync } from 'node:fs';
import { epochMs } from '../support/measure.js';
import { shippedSqlite } from '../support/shipped.js';

const { openSqliteStore } = shippedSqlite;

const [path, interval, stopFile] = process.argv.slice(2);
if (path === undefined || interval === undefined || stopFile === undefined) {
  throw new Error('usage: writer.ts PATH INTERVAL_MS STOP_FILE');
}
const intervalMs = Number(interval);
// The busy handler's steps do not depend on the timeout, only when it gives up: seeding a backlog
// between windows holds the lock for seconds on a loaded machine, and a writer that gave up there
// would end the whole group.
const store = openSqliteStore(path, { busyTimeoutMs: 120_000 });
const sleeper = new Int32Array(new SharedArrayBuffer(4));
const scheduled: number[] = [];
const latencies: number[] = [];
process.stdout.write('ready\n');
const start = epochMs();
for (let i = 0; !existsSync(stopFile); i++) {
  const due = start + i * intervalMs;
  const wait = due - epochMs();
  if (wait > 0) Atomics.wait(sleeper, 0, 0, wait);
  store.reserve(`writer-${process.pid}-${i}`, 'd', 1e9);
  scheduled.push(due);
  latencies.push(epochMs() - due);
}
store.close();
process.stdout.write(`${JSON.stringify({ scheduled, latencies })}\n`);
