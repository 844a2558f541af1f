// `npm run demo`: starts the payments service in a child process on a free port with a 2-second
// retention, drives real retried requests at it with fetch, and prints what each one got.
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { sql } from 'drizzle-orm';
import { openSqliteStore } from '../../src/sqlite/index.js';

const TTL_SECONDS = 2;
const SWEEP_INTERVAL_MS = 1000;

interface Row {
  step: string;
  status: number;
  replayed: string;
  result: string;
}

function startService(
  db: string,
  env: Record<string, string> = {},
): Promise<{ child: ChildProcess; url: string }> {
  const main = fileURLToPath(new URL('./main.ts', import.meta.url));
  const child = spawn(process.execPath, ['--import', 'tsx', main], {
    env: {
      ...process.env,
      PORT: '0',
      // The demo reads its SQLite file directly: a server URL in the shell must not move the data.
      IDEM_URL: '',
      IDEM_DB: db,
      IDEM_TTL_SECONDS: String(TTL_SECONDS),
      IDEM_SWEEP_INTERVAL_MS: String(SWEEP_INTERVAL_MS),
      ...env,
    },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  return new Promise((resolve, reject) => {
    let output = '';
    child.stdout?.on('data', (chunk: Buffer) => {
      output += chunk.toString();
      const match = /listening on (http:\/\/127\.0\.0\.1:\d+)/.exec(output);
      if (match?.[1]) resolve({ child, url: match[1] });
    });
    child.on('error', reject);
    child.on('exit', (code) => reject(new Error(`the service exited early with code ${code}`)));
  });
}

// Looks at the service's own SQLite file (WAL lets a second connection read it) until the slow
// request holds its key, so the duplicate really arrives while the first is running.
async function untilPending(db: string, key: string): Promise<void> {
  const store = openSqliteStore(db);
  try {
    const deadline = Date.now() + 5000;
    while (store.get(key)?.status !== 'pending' && Date.now() < deadline) await sleep(10);
  } finally {
    store.close();
  }
}

async function pay(url: string, key: string, body: object): Promise<Response> {
  return fetch(`${url}/payments`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'idempotency-key': key },
    body: JSON.stringify(body),
  });
}

async function row(step: string, response: Response): Promise<Row> {
  const body = (await response.json()) as { id?: string; type?: string };
  return {
    step,
    status: response.status,
    replayed: response.headers.get('idempotent-replayed') ?? '-',
    result: body.id ?? body.type?.replace(/^.*:/, '') ?? '',
  };
}

function print(rows: Row[]): void {
  const widths = [52, 6, 9];
  console.log(
    `${'request'.padEnd(widths[0] ?? 0)} ${'status'.padEnd(6)} ${'replayed'.padEnd(9)} result`,
  );
  for (const { step, status, replayed, result } of rows) {
    console.log(`${step.padEnd(52)} ${String(status).padEnd(6)} ${replayed.padEnd(9)} ${result}`);
  }
}

function exited(child: ChildProcess): Promise<NodeJS.Signals | null> {
  return new Promise((resolve) => {
    child.removeAllListeners('exit');
    if (child.exitCode !== null || child.signalCode !== null) resolve(child.signalCode);
    else child.once('exit', (_code, signal) => resolve(signal));
  });
}

// What the database file holds, read by a connection of its own.
function inFile(db: string, key: string): { payments: number; key: string } {
  const store = openSqliteStore(db);
  try {
    const { count } = store.db.get<{ count: number }>(sql`SELECT count(*) AS count FROM payments`);
    return { payments: count, key: store.get(key)?.status ?? 'none' };
  } finally {
    store.close();
  }
}

// A real crash between effect and answer: the service is told to SIGKILL itself inside the
// payment's ledger step, after the charge step was recorded and the payment row written, before
// that step commits.
async function crashBetweenEffectAndAnswer(db: string): Promise<void> {
  const lease = { IDEM_LEASE_SECONDS: '1' };
  const order = { amount: 4200, currency: 'EUR' };
  console.log('\nA crash between effect and answer (key order-3, lease 1 s):');
  const crashing = await startService(db, { ...lease, IDEM_CRASH_AFTER_EFFECT: '1' });
  const dropped = await pay(crashing.url, 'order-3', order).then(
    (response) => `answered ${response.status}`,
    () => 'connection dropped, no answer',
  );
  const signal = await exited(crashing.child);
  const after = inFile(db, 'order-3');
  console.log(
    `  the service charged the card, wrote the payment row and died by ${signal} before committing: ${dropped}`,
  );
  console.log(`  in the file after the crash: ${after.payments} payments, key ${after.key}`);
  const { child, url } = await startService(db, lease);
  try {
    let response = await pay(url, 'order-3', order);
    const deadline = Date.now() + 15_000;
    while (response.status === 409 && Date.now() < deadline) {
      await sleep(250);
      response = await pay(url, 'order-3', order);
    }
    const retried = await row('retry after restart and lease', response);
    const again = await row('retry once more', await pay(url, 'order-3', order));
    const final = inFile(db, 'order-3');
    console.log(`  ${retried.step}: ${retried.status} ${retried.result}`);
    console.log(`  ${again.step}: ${again.status} replayed ${again.replayed} ${again.result}`);
    console.log(
      `  in the file now: ${final.payments} payment, key ${final.key}: the retry went on from the recorded charge step (the provider is not asked again) and the payment row commits with its step's record or not at all, so nothing happened twice.`,
    );
  } finally {
    child.removeAllListeners('exit');
    child.kill('SIGTERM');
    await exited(child);
  }
}

const dir = mkdtempSync(join(tmpdir(), 'idem-demo-'));
const { child, url } = await startService(join(dir, 'payments.db'));
try {
  console.log(`payments service at ${url}, answers kept ${TTL_SECONDS} s\n`);
  const rows: Row[] = [];
  const order = { amount: 1000, currency: 'EUR' };
  const started = Date.now();
  rows.push(await row('first request (key order-1)', await pay(url, 'order-1', order)));
  rows.push(await row('retry, same body', await pay(url, 'order-1', order)));
  rows.push(
    await row(
      'retry, JSON keys reordered',
      await pay(url, 'order-1', { currency: 'EUR', amount: 1000 }),
    ),
  );
  rows.push(
    await row(
      'same key, different body',
      await pay(url, 'order-1', { amount: 2000, currency: 'EUR' }),
    ),
  );

  const slow = { amount: 500, currency: 'USD', delay_ms: 1000 };
  const first = pay(url, 'order-2', slow);
  await untilPending(join(dir, 'payments.db'), 'order-2');
  const duplicate = await row(
    'concurrent duplicate while the first runs',
    await pay(url, 'order-2', slow),
  );
  rows.push(await row('slow first request (key order-2, 1 s)', await first), duplicate);

  await sleep(Math.max(0, started + TTL_SECONDS * 1000 - Date.now()));
  const deadline = Date.now() + 15_000;
  for (;;) {
    const response = await pay(url, 'order-1', order);
    const result = await row('order-1 again after expiry and a sweep', response);
    const stillKept = response.status === 409 || result.replayed === 'true';
    if (!stillKept || Date.now() > deadline) {
      rows.push(result);
      break;
    }
    if (response.status === 409 && !rows.some((r) => r.result === 'answer-expired')) {
      rows.push({ ...result, step: 'order-1 again, expired but not yet swept' });
    }
    await sleep(SWEEP_INTERVAL_MS / 2);
  }
  print(rows);

  const executed = (await (await fetch(`${url}/payments`)).json()) as unknown[];
  console.log(`\nGET /payments: ${executed.length} payments actually executed`);
  console.log(
    'The last request shows the limit of retention: once an answer is swept, its key is a new request.',
  );
  await crashBetweenEffectAndAnswer(join(dir, 'crash.db'));
} finally {
  child.removeAllListeners('exit');
  child.kill('SIGTERM');
  rmSync(dir, { recursive: true, force: true });
}
