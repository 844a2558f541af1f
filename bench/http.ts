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

// Each side's route on the benchmark's server (bench/children/http-server.ts), and its name in
// the details.
const SIDES = {
  ours: { route: '/payments', name: 'ours' },
  plain: { route: '/plain/payments', name: 'noLayer' },
  storeCalls: { route: '/store/payments', name: 'storeCallsOnly' },
  transactional: { route: '/transactional/payments', name: 'transactional' },
  peer: { route: '/peer/payments', name: 'nodeIdempotencyRedis' },
} as const;

type Side = keyof typeof SIDES;

/**
 * End to end over loopback HTTP: one Express server (a child process) with the payments route
 * behind our middleware (SQLite), with no layer, with the middleware's two store calls made by
 * hand (its statements and commits without its JavaScript), in the transactional form (the
 * payment and its answer in one commit), and behind a middleware over `@node-idempotency/core`
 * (Redis started for the benchmark, no disk); autocannon drives each in turn with the same load,
 * the sides rotating.
 */
export async function httpEndToEnd({ quick }: BenchSize): Promise<GroupResult> {
  const rounds = quick ? 3 : 7;
  const seconds = quick ? 2 : 4;
  const { dir, cleanup } = benchDir();
  const redis = await startRedis('none');
  const server = startChild('http-server.ts', [freshStoreFile(dir), redis.url]);
  try {
    const port = Number(await server.firstLine);
    for (const side of ['ours', 'transactional', 'peer'] as const) {
      await checkReplay(port, SIDES[side].route);
    }
    // Warm every route up (JIT, connections) before anything is timed.
    for (const { route } of Object.values(SIDES)) await load(port, route, 1);
    const cpu = Object.fromEntries(Object.keys(SIDES).map((side) => [side, [] as Load[]])) as {
      [S in Side]: Load[];
    };
    const timed = (side: Side) => async () => {
      const run = await load(port, SIDES[side].route, seconds);
      cpu[side].push(run);
      return run.requestsPerSec;
    };
    const sides = await rotate(rounds, {
      ours: timed('ours'),
      plain: timed('plain'),
      storeCalls: timed('storeCalls'),
      transactional: timed('transactional'),
      peer: timed('peer'),
    });
    const details: Record<string, number> = {
      'http.connections': CONNECTIONS,
      'http.secondsPerRun': seconds,
    };
    for (const side of Object.keys(SIDES) as Side[]) {
      const { name } = SIDES[side];
      details[`http.requestsPerSec.${name}`] = median(sides[side]);
      details[`http.serverCpuMicrosPerRequest.${name}`] = median(
        cpu[side].map((run) => run.cpuMicrosPerRequest),
      );
      details[`http.serverCpuShare.${name}`] = median(cpu[side].map((run) => run.cpuShare));
    }
    return {
      metrics: {
        'http.layerOverhead': pairedRatio({ ours: sides.ours, theirs: sides.plain }),
        'http.storeCallsOverhead': pairedRatio({ ours: sides.storeCalls, theirs: sides.plain }),
        'http.layerVsStoreCalls': pairedRatio({ ours: sides.ours, theirs: sides.storeCalls }),
        'http.transactionalOverhead': pairedRatio({
          ours: sides.transactional,
          theirs: sides.plain,
        }),
        'http.vsNodeIdempotencyRedis': pairedRatio({ ours: sides.ours, theirs: sides.peer }),
      },
      details,
    };
  } finally {
    server.process.kill('SIGTERM');
    await server.output.catch(() => undefined);
    await redis.stop();
    cleanup();
  }
}
