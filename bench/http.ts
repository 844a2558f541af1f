import { randomUUID } from 'node:crypto';
import autocannon from 'autocannon';
import { startChild } from './support/child.js';
import { check, median, pairedRatio, rotate } from './support/measure.js';
import { startRedis } from './support/redis.js';
import type { BenchSize, GroupResult } from './support/report.js';
import { benchDir, freshStoreFile } from './support/sqlite-files.js';

const CONNECTIONS = 16;
const BODY = JSON.stringify({ amount: 4200, currency: 'eur' });

// The server's CPU time so far, in microseconds (user and system, every thread).
async function serverCpuMicros(port: number): Promise<number> {
  const usage = (await (await fetch(`http://127.0.0.1:${port}/cpu`)).json()) as {
    user: number;
    system: number;
  };
  return usage.user + usage.system;
}

interface Load {
  readonly requestsPerSec: number;
  /** Server CPU time per request, in microseconds. */
  readonly cpuMicrosPerRequest: number;
  /** Server CPU time over wall time: 1 is one core busy throughout. */
  readonly cpuShare: number;
}

// Requests per second of `POST <route>` under autocannon, every request with a fresh key, after
// checking that every answer was a 2xx and nothing failed, and the server's CPU time behind them.
async function load(port: number, route: string, seconds: number): Promise<Load> {
  const cpuBefore = await serverCpuMicros(port);
  const result = await autocannon({
    url: `http://127.0.0.1:${port}`,
    connections: CONNECTIONS,
    duration: seconds,
    requests: [
      {
        method: 'POST',
        path: route,
        headers: { 'content-type': 'application/json' },
        body: BODY,
        setupRequest: (request) => ({
          ...request,
          headers: { ...request.headers, 'idempotency-key': `"${randomUUID()}"` },
        }),
      },
    ],
  });
  check(
    result.errors === 0 && result.timeouts === 0 && result.non2xx === 0,
    `${route}: ${result.errors} errors, ${result.timeouts} timeouts, ${result.non2xx} non-2xx`,
  );
  const cpu = (await serverCpuMicros(port)) - cpuBefore;
  return {
    requestsPerSec: result.requests.total / seconds,
    cpuMicrosPerRequest: cpu / result.requests.total,
    cpuShare: cpu / (seconds * 1e6),
  };
}

// One request and its retry on `route`: the retry must be replayed with the first answer.
async function checkReplay(port: number, route: string): Promise<void> {
  const init = {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'idempotency-key': `"${randomUUID()}"` },
    body: BODY,
  };
  const first = await fetch(`http://127.0.0.1:${port}${route}`, init);
  const retry = await fetch(`http://127.0.0.1:${port}${route}`, init);
  const [a, b] = [await first.text(), await retry.text()];
  check(first.status === 201 && retry.status === 201 && a === b, `${route} replays`);
  check(retry.headers.get('idempotent-replayed') === 'true', `${route} marks the replay`);
}

/**
 * End to end over loopback HTTP: one Express server (a child process) with the payments route
 * behind our middleware (SQLite), behind a middleware over `@node-idempotency/core` (Redis started
 * for the benchmark, no disk), and with no layer; autocannon drives each in turn with the same
 * load, the three rotating.
 */
export async function httpEndToEnd({ quick }: BenchSize): Promise<GroupResult> {
  const rounds = quick ? 3 : 7;
  const seconds = quick ? 2 : 4;
  const { dir, cleanup } = benchDir();
  const redis = await startRedis('none');
  const server = startChild('http-server.ts', [freshStoreFile(dir), redis.url]);
  try {
    const port = Number(await server.firstLine);
    await checkReplay(port, '/payments');
    await checkReplay(port, '/peer/payments');
    // Warm every route up (JIT, connections) before anything is timed.
    for (const route of ['/payments', '/plain/payments', '/peer/payments']) {
      await load(port, route, 1);
    }
    const cpu = { ours: [] as Load[], plain: [] as Load[], peer: [] as Load[] };
    const timed = (side: keyof typeof cpu, route: string) => async () => {
      const run = await load(port, route, seconds);
      cpu[side].push(run);
      return run.requestsPerSec;
    };
    const sides = await rotate(rounds, {
      ours: timed('ours', '/payments'),
      plain: timed('plain', '/plain/payments'),
      peer: timed('peer', '/peer/payments'),
    });
    const cpuPerRequest = (side: keyof typeof cpu) =>
      median(cpu[side].map((run) => run.cpuMicrosPerRequest));
    const cpuShare = (side: keyof typeof cpu) => median(cpu[side].map((run) => run.cpuShare));
    return {
      metrics: {
        'http.layerOverhead': pairedRatio({ ours: sides.ours, theirs: sides.plain }),
        'http.vsNodeIdempotencyRedis': pairedRatio({ ours: sides.ours, theirs: sides.peer }),
      },
      details: {
        'http.requestsPerSec.ours': median(sides.ours),
        'http.requestsPerSec.noLayer': median(sides.plain),
        'http.requestsPerSec.nodeIdempotencyRedis': median(sides.peer),
        'http.serverCpuMicrosPerRequest.ours': cpuPerRequest('ours'),
        'http.serverCpuMicrosPerRequest.noLayer': cpuPerRequest('plain'),
        'http.serverCpuMicrosPerRequest.nodeIdempotencyRedis': cpuPerRequest('peer'),
        'http.serverCpuShare.ours': cpuShare('ours'),
        'http.serverCpuShare.noLayer': cpuShare('plain'),
        'http.serverCpuShare.nodeIdempotencyRedis': cpuShare('peer'),
        'http.connections': CONNECTIONS,
        'http.secondsPerRun': seconds,
      },
    };
  } finally {
    server.process.kill('SIGTERM');
    await server.output.catch(() => undefined);
    await redis.stop();
    cleanup();
  }
}
