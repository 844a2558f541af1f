import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import type { AddressInfo } from 'node:net';
import { fileURLToPath } from 'node:url';
import { gzipSync } from 'node:zlib';
import Database from 'better-sqlite3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createPaymentsApp } from '../../examples/payments/app.js';
import { sqlitePayments } from '../../examples/payments/backend.js';
import { createDrain } from '../../examples/payments/drain.js';
import { openSqliteStore } from '../../src/sqlite/index.js';
import { SWEEP_NOW, seedBacklog, tally } from '../support/backlog.js';
import { spawnTs } from '../support/child.js';
import { type PaymentsService, startPaymentsService } from '../support/payments-service.js';
import { freshDbPath, tempDir } from '../support/temp.js';
import { until } from '../support/waiting.js';

const dir = tempDir('idem-service-');
const root = fileURLToPath(new URL('../..', import.meta.url));

describe('the payments service answers unreadable bodies with problems', () => {
  let service: PaymentsService;
  let url: string;

  beforeAll(async () => {
    service = await startPaymentsService(dir);
    url = service.url;
  });

  afterAll(() => service.close());

  const payment = JSON.stringify({ amount: 1, currency: 'EUR' });
  const padded = JSON.stringify({ amount: 1, currency: 'EUR', pad: 'x'.repeat(200_000) });
  const bomb = gzipSync(Buffer.concat([Buffer.from('{"pad":"'), Buffer.alloc(20_000_000, 'a')]));

  it.each([
    ['a 200 KB body', 413, {}, padded],
    ['a gzip bomb', 413, { 'content-encoding': 'gzip' }, bomb],
    ['garbage gzip', 400, { 'content-encoding': 'gzip' }, Buffer.from('not gzip at all')],
    ['an unsupported Content-Encoding', 415, { 'content-encoding': 'compress' }, payment],
    ['bad JSON', 400, {}, '{"amount":'],
  ] as const)(
    '%s: %i application/problem+json, no stack, no path, nothing reserved',
    async (_name, status, headers, body) => {
      const response = await fetch(`${url}/payments`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'idempotency-key': 'k1', ...headers },
        body,
      });
      expect(response.status).toBe(status);
      expect(response.headers.get('content-type')).toMatch(/^application\/problem\+json/);
      const text = await response.text();
      expect(JSON.parse(text)).toEqual({
        type: expect.stringMatching(/^urn:payments-example:problem:/),
        title: expect.any(String),
        status,
        detail: expect.any(String),
      });
      expect(text).not.toMatch(/\bat \w|node_modules|\/work\/|\.ts\b|\.js\b|Error/);
      expect(service.store.counts()).toEqual({ pending: 0, done: 0 });
    },
  );

  it('answers an unknown route with a 404 problem', async () => {
    const response = await fetch(`${url}/nope`);
    expect(response.status).toBe(404);
    expect(response.headers.get('content-type')).toMatch(/^application\/problem\+json/);
  });
});

interface NpmRun {
  readonly child: ChildProcess;
  readonly output: () => string;
  readonly exit: Promise<number | null>;
}

// `npm` in its own process group, so a process it leaves behind can be found afterwards.
function npm(args: string[], env: NodeJS.ProcessEnv): NpmRun {
  const child = spawn('npm', args, {
    cwd: root,
    env: { ...process.env, DATABASE_URL: '', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
    detached: true,
  });
  let output = '';
  child.stdout?.on('data', (chunk: Buffer) => {
    output += chunk.toString();
  });
  child.stderr?.on('data', (chunk: Buffer) => {
    output += chunk.toString();
  });
  const exit = new Promise<number | null>((resolve) => child.on('close', resolve));
  return { child, output: () => output, exit };
}

// Whether any process is left in the group npm led.
function groupAlive(pgid: number): boolean {
  try {
    process.kill(-pgid, 0);
    return true;
  } catch {
    return false;
  }
}

function keyRow(path: string, key: string): { status: string } | undefined {
  const client = new Database(path, { readonly: true, fileMustExist: true });
  try {
    return client.prepare('SELECT status FROM keys WHERE id = ?').get(key) as
      | { status: string }
      | undefined;
  } finally {
    client.close();
  }
}

describe('npm start under SIGTERM and SIGINT', () => {
  for (const signal of ['SIGTERM', 'SIGINT'] as const) {
    it(`on ${signal} to npm: stops accepting, lets the request in flight record its answer, exits 0`, async () => {
      const path = freshDbPath(dir);
      openSqliteStore(path).close();
      const run = npm(['start'], {
        IDEM_DB: path,
        IDEM_URL: '',
        PORT: '0',
        IDEM_SWEEP_INTERVAL_MS: '3600000',
        IDEM_SHUTDOWN_GRACE_MS: '30000',
      });
      try {
        await until(() => /listening on (http:\S+)/.test(run.output()), 20);
        const url = /listening on (http:\S+)/.exec(run.output())?.[1] ?? '';
        const inFlight = fetch(`${url}/payments`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', 'idempotency-key': 'slow' },
          body: JSON.stringify({ amount: 5, currency: 'EUR', delay_ms: 1500 }),
        });
        await until(() => keyRow(path, 'slow')?.status === 'pending', 20);
        process.kill(run.child.pid as number, signal);
        await until(() => run.output().includes('draining'), 20);
        await expect(fetch(`${url}/payments`)).rejects.toThrow();

        const answer = await inFlight;
        expect(answer.status).toBe(201);
        expect(await answer.json()).toMatchObject({ amount: 5, currency: 'EUR' });
        expect(await run.exit).toBe(0);
        expect(keyRow(path, 'slow')?.status).toBe('done');
        await until(() => !groupAlive(run.child.pid as number), 20);
      } finally {
        if (groupAlive(run.child.pid as number))
          process.kill(-(run.child.pid as number), 'SIGKILL');
      }
    });
  }
});

describe('the payments service while it stops', () => {
  it('waits for a payment in flight to finish its key, and refuses new requests before claiming anything', async () => {
    const store = openSqliteStore(freshDbPath(dir));
    const drain = createDrain();
    const server = createPaymentsApp(sqlitePayments(store), {
      ttlSeconds: 60,
      now: () => Date.now() / 1000,
      drain,
    }).listen(0, '127.0.0.1');
    try {
      await once(server, 'listening');
      const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
      const pay = (key: string, delayMs = 0) =>
        fetch(`${url}/payments`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', 'idempotency-key': key },
          body: JSON.stringify({ amount: 5, currency: 'EUR', delay_ms: delayMs }),
        });
      const inFlight = pay('slow', 1000);
      await until(() => store.get('slow')?.status === 'pending', 20);
      const stopped = drain.stop();
      const late = await pay('late');
      expect(late.status).toBe(503);
      expect(late.headers.get('connection')).toBe('close');
      expect(store.get('late')).toBeNull();
      await stopped;
      expect(store.get('slow')?.status).toBe('done');
      expect((await inFlight).status).toBe(201);
    } finally {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
      store.close();
    }
  });
});

describe('npm start under SIGTERM past its grace period', () => {
  it('drops the connection of a payment still running, but closes the store only once its key is finished', async () => {
    const path = freshDbPath(dir);
    openSqliteStore(path).close();
    const run = npm(['start'], {
      IDEM_DB: path,
      IDEM_URL: '',
      PORT: '0',
      IDEM_SWEEP_INTERVAL_MS: '3600000',
      // Far shorter than the payment: the grace period ends while it runs.
      IDEM_SHUTDOWN_GRACE_MS: '100',
    });
    try {
      await until(() => /listening on (http:\S+)/.test(run.output()), 20);
      const url = /listening on (http:\S+)/.exec(run.output())?.[1] ?? '';
      const inFlight = fetch(`${url}/payments`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'idempotency-key': 'slow' },
        body: JSON.stringify({ amount: 5, currency: 'EUR', delay_ms: 2000 }),
      }).then(
        (response) => response.status,
        () => 'dropped' as const,
      );
      await until(() => keyRow(path, 'slow')?.status === 'pending', 20);
      process.kill(run.child.pid as number, 'SIGTERM');
      expect(await run.exit).toBe(0);
      // The client got its answer, or lost its connection; either way the key is not left pending.
      const answer = await inFlight;
      const row = keyRow(path, 'slow');
      if (answer === 201) expect(row?.status).toBe('done');
      else expect(row?.status).not.toBe('pending');
      await until(() => !groupAlive(run.child.pid as number), 20);
    } finally {
      if (groupAlive(run.child.pid as number)) process.kill(-(run.child.pid as number), 'SIGKILL');
    }
  });
});

describe('npm run idem -- sweep under SIGTERM', () => {
  it('hands the signal to the sweep: it stops after its batch and leaves no process behind', async () => {
    const path = freshDbPath(dir);
    const backlog = 100_000;
    seedBacklog(path, { expired: backlog, live: 10, pending: 10, stalePending: 10 });
    const run = npm(
      ['run', 'idem', '--', 'sweep', '--db', path, '--now', String(SWEEP_NOW), '--batch', '50'],
      {},
    );
    try {
      await until(() => tally(path).expired < backlog, 20);
      process.kill(run.child.pid as number, 'SIGTERM');
      await run.exit;
      const summary = /\{.*"stoppedBy".*\}/.exec(run.output())?.[0] ?? '{}';
      expect(JSON.parse(summary)).toMatchObject({ stoppedBy: 'signal' });
      expect(tally(path).expired).toBeGreaterThan(0);
      await until(() => !groupAlive(run.child.pid as number), 20);
    } finally {
      if (groupAlive(run.child.pid as number)) process.kill(-(run.child.pid as number), 'SIGKILL');
    }
  });
});

describe('the payments service killed mid-request', () => {
  const main = fileURLToPath(new URL('../../examples/payments/main.ts', import.meta.url));

  function start(path: string): { child: ChildProcess; url: Promise<string> } {
    const { child } = spawnTs(main, [], {
      IDEM_DB: path,
      IDEM_URL: '',
      PORT: '0',
      IDEM_LEASE_SECONDS: '2',
      IDEM_SWEEP_INTERVAL_MS: '3600000',
      DATABASE_URL: '',
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
    return { child, url };
  }

  function lease(path: string): { status: string; lease_until: number | null } | undefined {
    const client = new Database(path, { readonly: true, fileMustExist: true });
    try {
      return client.prepare('SELECT status, lease_until FROM keys WHERE id = ?').get('crash') as
        | { status: string; lease_until: number | null }
        | undefined;
    } finally {
      client.close();
    }
  }

  it('kill -9, restart, retry after the lease: the payment runs once more and is recorded', async () => {
    const path = freshDbPath(dir);
    openSqliteStore(path).close();
    const pay = (url: string) =>
      fetch(`${url}/payments`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'idempotency-key': 'crash' },
        body: JSON.stringify({ amount: 7, currency: 'EUR', delay_ms: 5000 }),
      });

    const first = start(path);
    const lost = pay(await first.url).catch((error: unknown) => error);
    await until(() => lease(path)?.status === 'pending', 20);
    first.child.kill('SIGKILL');
    expect(await lost).toBeInstanceOf(Error);

    const second = start(path);
    try {
      const url = await second.url;
      const deadline = lease(path)?.lease_until ?? Number.POSITIVE_INFINITY;
      await until(() => Date.now() / 1000 > deadline, 20);
      const retry = await pay(url);
      expect(retry.status).toBe(201);
      const payment = (await retry.json()) as { id: string };
      expect(lease(path)?.status).toBe('done');
      const again = await pay(url);
      expect(again.headers.get('idempotent-replayed')).toBe('true');
      expect(((await again.json()) as { id: string }).id).toBe(payment.id);
      const all = (await (await fetch(`${url}/payments`)).json()) as unknown[];
      expect(all).toHaveLength(1);
    } finally {
      second.child.kill('SIGKILL');
    }
  });
});
