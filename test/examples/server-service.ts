import type { ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { expect } from 'vitest';
import { type ChildResult, spawnTs } from '../support/child.js';
import { idem } from '../support/cli.js';
import { until } from '../support/waiting.js';

const MAIN = fileURLToPath(new URL('../../examples/payments/main.ts', import.meta.url));
const LEASE_SECONDS = 2;

/** A fresh database on a real server, as the payments service sees it. */
export interface ServerDatabase {
  /** The connection string `IDEM_URL` gets. */
  readonly url: string;
  /** The key's row, read straight from the `keys` table. */
  keyRow(key: string): Promise<{ status: string; leaseUntil: number | null } | undefined>;
  /** The ids in the `payments` table, read straight from it. */
  paymentIds(): Promise<string[]>;
}

interface Service {
  readonly child: ChildProcess;
  readonly url: Promise<string>;
  readonly ended: Promise<ChildResult>;
}

function startService(idemUrl: string, env: NodeJS.ProcessEnv = {}): Service {
  const { child, result } = spawnTs(MAIN, [], {
    IDEM_URL: idemUrl,
    IDEM_DB: '',
    // The test run's own server URL must not reach the service: IDEM_URL alone chooses.
    DATABASE_URL: '',
    PORT: '0',
    IDEM_LEASE_SECONDS: String(LEASE_SECONDS),
    IDEM_SWEEP_INTERVAL_MS: '3600000',
    ...env,
  });
  let output = '';
  const url = new Promise<string>((resolve, reject) => {
    child.stdout?.on('data', (chunk: Buffer) => {
      output += chunk.toString();
      const found = /listening on (http:\S+)/.exec(output)?.[1];
      if (found) resolve(found);
    });
    child.on('close', () => reject(new Error(`the service ended: ${output}`)));
  });
  return { child, url, ended: result };
}

function pay(url: string, key: string, body: Record<string, unknown>): Promise<Response> {
  return fetch(`${url}/payments`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'idempotency-key': `"${key}"` },
    body: JSON.stringify(body),
  });
}

async function problemType(response: Response): Promise<string> {
  expect(response.headers.get('content-type')).toMatch(/^application\/problem\+json/);
  return ((await response.json()) as { type: string }).type;
}

async function pendingRows(url: string): Promise<Record<string, unknown>[]> {
  const result = await idem(['pending', '--json', '--url', url]);
  expect(result.stderr).toBe('');
  expect(result.code).toBe(0);
  return JSON.parse(result.stdout) as Record<string, unknown>[];
}

async function stop(service: Service): Promise<void> {
  service.child.kill('SIGTERM');
  const ended = await service.ended;
  expect(ended.stdout).toContain('stopped');
  expect(ended.code).toBe(0);
}

/**
 * Drives `npm start` with `IDEM_URL` on `db` through a payment, its replay, a 422 for another
 * body, a 409 while a payment is in flight, a kill -9 inside a payment's transaction after its row
 * is written (`IDEM_CRASH_AFTER_EFFECT=1`), `idem pending` on the pending key it leaves, and the
 * retry after the lease that charges once.
 */
export async function exerciseService(db: ServerDatabase): Promise<void> {
  const first = startService(db.url);
  try {
    const url = await first.url;
    const created = await pay(url, 'order-1', { amount: 1250, currency: 'eur' });
    expect(created.status).toBe(201);
    const payment = (await created.json()) as { id: string };
    expect(payment).toEqual({
      id: expect.stringMatching(/^pay_/),
      amount: 1250,
      currency: 'EUR',
      createdAt: expect.any(Number),
    });
    expect(created.headers.get('location')).toBe(`/payments/${payment.id}`);

    const replay = await pay(url, 'order-1', { currency: 'eur', amount: 1250 });
    expect(replay.status).toBe(201);
    expect(replay.headers.get('idempotent-replayed')).toBe('true');
    expect(await replay.json()).toEqual(payment);

    const reused = await pay(url, 'order-1', { amount: 99, currency: 'eur' });
    expect(reused.status).toBe(422);
    expect(await problemType(reused)).toMatch(/key-reused$/);

    const slow = pay(url, 'order-2', { amount: 5, currency: 'usd', delay_ms: 1500 });
    await until(async () => (await db.keyRow('order-2'))?.status === 'pending', 50);
    const duplicate = await pay(url, 'order-2', { amount: 5, currency: 'usd', delay_ms: 1500 });
    expect(duplicate.status).toBe(409);
    expect(await problemType(duplicate)).toMatch(/request-in-progress$/);
    expect((await slow).status).toBe(201);

    const listed = (await (await fetch(`${url}/payments`)).json()) as { id: string }[];
    expect(listed.map((row) => row.id).sort()).toEqual((await db.paymentIds()).sort());
    expect(listed).toHaveLength(2);
    expect(await pendingRows(db.url)).toEqual([]);
  } finally {
    if (first.child.exitCode === null) await stop(first);
  }

  const order3 = { amount: 700, currency: 'eur' };
  const crashing = startService(db.url, { IDEM_CRASH_AFTER_EFFECT: '1' });
  try {
    const lost = pay(await crashing.url, 'order-3', order3).catch((error: unknown) => error);
    expect(await lost).toBeInstanceOf(Error);
    expect((await crashing.ended).signal).toBe('SIGKILL');
  } finally {
    if (crashing.child.exitCode === null) crashing.child.kill('SIGKILL');
  }
  // The payment row died with its transaction: still the two payments of before.
  expect(await db.paymentIds()).toHaveLength(2);
  const left = await db.keyRow('order-3');
  expect(left?.status).toBe('pending');

  const pending = await pendingRows(db.url);
  expect(pending).toEqual([
    expect.objectContaining({
      key: 'order-3',
      fencingToken: expect.any(Number),
      leaseUntil: left?.leaseUntil,
    }),
  ]);
  // Live or already lapsed, depending on how long the CLI took to start: never unrecorded.
  expect(['live', 'lapsed']).toContain(pending[0]?.state);

  const restarted = startService(db.url);
  try {
    const url = await restarted.url;
    const deadline = left?.leaseUntil ?? Number.POSITIVE_INFINITY;
    await until(async () => Date.now() / 1000 > deadline, 50);
    const retry = await pay(url, 'order-3', order3);
    expect(retry.status).toBe(201);
    const charged = (await retry.json()) as { id: string };
    expect(await db.paymentIds()).toHaveLength(3);
    expect(await db.paymentIds()).toContain(charged.id);
    const again = await pay(url, 'order-3', order3);
    expect(again.headers.get('idempotent-replayed')).toBe('true');
    expect(((await again.json()) as { id: string }).id).toBe(charged.id);
    expect((await db.keyRow('order-3'))?.status).toBe('done');
    expect(await pendingRows(db.url)).toEqual([]);
  } finally {
    await stop(restarted);
  }
}
