// The payments service: `npm start`. Configuration comes from the environment:
//   IDEM_URL                a postgres://, postgresql:// or mysql:// URL: keys and payments live
//                           in that database instead of a SQLite file (DATABASE_URL is not read)
//   IDEM_DB                 the SQLite file when IDEM_URL is not set (default ./idempotency.db)
//   PORT                    the port on 127.0.0.1 (default 3000; 0 picks a free one)
//   IDEM_TTL_SECONDS        how long answers are replayed (default 86400)
//   IDEM_LEASE_SECONDS      the lease of a request in flight (default 30): the key of a request
//                           whose process died is taken over by a retry once it lapses
//   IDEM_SWEEP_INTERVAL_MS  how often the built-in sweeper deletes expired answers (default 60000)
//   IDEM_SHUTDOWN_GRACE_MS  how long SIGTERM/SIGINT wait for requests in flight (default 10000)
//   IDEM_STEP_SECRET        the key of the payment steps' derived keys (at least 16 bytes, the
//                           same in every instance; default the example's public demo secret)
//   IDEM_CRASH_AFTER_EFFECT set to 1 to die by SIGKILL inside the first payment's ledger step,
//                           after its row is written: what `npm run demo` shows surviving
import type { AddressInfo } from 'node:net';
import { startSweeper } from '../../src/index.js';
import { createPaymentsApp } from './app.js';
import { openPaymentsBackend } from './backend.js';
import { createDrain } from './drain.js';

function numberFromEnv(name: string, fallback: number): number {
  const raw = process.env[name];
  if (raw === undefined || raw === '') return fallback;
  const value = Number(raw);
  if (!Number.isFinite(value) || value < 0) {
    throw new Error(`${name} must be a non-negative number, got ${JSON.stringify(raw)}`);
  }
  return value;
}

const port = numberFromEnv('PORT', 3000);
const ttlSeconds = numberFromEnv('IDEM_TTL_SECONDS', 86_400);
const leaseSeconds = numberFromEnv('IDEM_LEASE_SECONDS', 30);
const sweepIntervalMs = numberFromEnv('IDEM_SWEEP_INTERVAL_MS', 60_000);
const graceMs = numberFromEnv('IDEM_SHUTDOWN_GRACE_MS', 10_000);
const now = () => Date.now() / 1000;

const crashAfterEffect = process.env.IDEM_CRASH_AFTER_EFFECT === '1';
const backend = await openPaymentsBackend(process.env);
const { store } = backend;
const drain = createDrain();
const stepSecret = process.env.IDEM_STEP_SECRET || undefined;
const app = createPaymentsApp(backend, {
  ttlSeconds,
  now,
  leaseSeconds,
  crashAfterEffect,
  drain,
  ...(stepSecret === undefined ? {} : { stepSecret }),
});

// Retention runs in the background: each sweep deletes expired answers in short batches and never
// touches a pending row. Every instance of the service may run it: one sweeps at a time.
const sweeper = startSweeper(store, {
  intervalSeconds: sweepIntervalMs / 1000,
  now,
  onError: (error: unknown) => console.error('sweep failed:', error),
});

// Express 5 hands a listen error (a busy port) to this callback: an operator's mistake, not a
// crash, so one line and exit 1 instead of a stack trace.
const server = app.listen(port, '127.0.0.1', (error?: NodeJS.ErrnoException) => {
  if (error) {
    const reason =
      error.code === 'EADDRINUSE'
        ? `port ${port} on 127.0.0.1 is already in use; stop the other process or set PORT (0 picks a free one)`
        : `cannot listen on 127.0.0.1:${port}: ${error.message}`;
    console.error(`payments service: ${reason}`);
    sweeper
      .stop()
      .then(() => backend.close())
      .finally(() => process.exit(1));
    return;
  }
  const { port: actual } = server.address() as AddressInfo;
  console.log(
    `payments service listening on http://127.0.0.1:${actual} (db ${backend.location}, ttl ${ttlSeconds} s, pid ${process.pid})`,
  );
});

// Graceful shutdown: stop accepting, let the requests in flight finish and record their answers,
// then close the store. A request still running after the grace period loses its connection, but
// the store closes only once every payment in flight has finished or released its key (the drain):
// closing it under a running payment would leave its key pending, and retries would get 409 until
// its lease lapsed.
let stopping = false;
function shutdown(signal: NodeJS.Signals): void {
  if (stopping) return;
  stopping = true;
  console.log(`${signal}: draining requests in flight (up to ${graceMs} ms)`);
  // Ends after the batch in flight; awaited before the store closes below.
  const sweeperStopped = sweeper.stop();
  const drained = drain.stop();
  // Keep-alive connections between requests would hold close() open: drop them as they go idle.
  const idle = setInterval(() => server.closeIdleConnections(), 50);
  const grace = setTimeout(() => {
    if (drain.running > 0) {
      console.log(`grace period over: ${drain.running} payments still finishing their keys`);
    }
    server.closeAllConnections();
  }, graceMs);
  const closed = new Promise<void>((resolve) => server.close(() => resolve()));
  server.closeIdleConnections();
  Promise.all([closed, drained, sweeperStopped])
    .then(() => {
      clearInterval(idle);
      clearTimeout(grace);
      return backend.close();
    })
    .then(
      () => {
        console.log('stopped');
        process.exit(0);
      },
      (error: unknown) => {
        console.error('closing the store failed:', error);
        process.exit(1);
      },
    );
}
process.on('SIGTERM', shutdown);
process.on('SIGINT', shutdown);
