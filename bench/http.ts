import { randomUUID } from 'node:crypto';
import autocannon from 'autocannon';
import { startChild } from './support/child.js';
import { check, median, pairedRatio, rotate } from './support/measure.js';
import { startRedis } from './support/redis.js';
import type { BenchSize, GroupResult } from './support/report.js';
import { benchDir, freshStoreFile } from './support/sqlite-files.js';

const CONNECTIONS = 16;
const BODY = JSON.stringify({ amount: 4200, currency: 'eur' });

// Requests per second of `POST <route>` under autocannon, every request with a fresh key, after
// checking that every answer was a 2xx and nothing failed.
async function load(port: number, route: string, seconds: number): Promise<number> {
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
  return result.requests.total / seconds;
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
    const sides = await rotate(rounds, {
      ours: () => load(port, '/payments', seconds),
      plain: () => load(port, '/plain/payments', seconds),
      peer: () => load(port, '/peer/payments', seconds),
    });
    return {
      metrics: {
        'http.layerOverhead': pairedRatio({ ours: sides.ours, theirs: sides.plain }),
        'http.vsNodeIdempotencyRedis': pairedRatio({ ours: sides.ours, theirs: sides.peer }),
      },
      details: {
        'http.requestsPerSec.ours': median(sides.ours),
        'http.requestsPerSec.noLayer': median(sides.plain),
        'http.requestsPerSec.nodeIdempotencyRedis': median(sides.peer),
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
