import { once } from 'node:events';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { fileURLToPath } from 'node:url';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { runTs } from '../support/child.js';
import { type PaymentsService, startPaymentsService } from '../support/payments-service.js';
import { freshDbPath, tempDir } from '../support/temp.js';

const dir = tempDir('idem-payments-');

describe('payments example service', () => {
  let service: PaymentsService;
  let url: string;

  beforeEach(async () => {
    service = await startPaymentsService(dir);
    url = service.url;
  });

  afterEach(() => service.close());

  function pay(key: string | undefined, body: string): Promise<Response> {
    return fetch(`${url}/payments`, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        ...(key === undefined ? {} : { 'idempotency-key': key }),
      },
      body,
    });
  }

  async function listPayments(): Promise<unknown[]> {
    const response = await fetch(`${url}/payments`);
    expect(response.status).toBe(200);
    return (await response.json()) as unknown[];
  }

  it('creates a payment once and replays it to retries', async () => {
    const created = await pay('p-1', JSON.stringify({ amount: 1250, currency: 'eur' }));
    expect(created.status).toBe(201);
    const payment = (await created.json()) as { id: string };
    expect(payment).toEqual({
      id: expect.stringMatching(/^pay_/),
      amount: 1250,
      currency: 'EUR',
      createdAt: expect.any(Number),
    });
    expect(created.headers.get('location')).toBe(`/payments/${payment.id}`);
    const retry = await pay('p-1', JSON.stringify({ currency: 'eur', amount: 1250 }));
    expect(retry.headers.get('idempotent-replayed')).toBe('true');
    expect(await retry.json()).toEqual(payment);
    expect(await listPayments()).toEqual([payment]);
  });

  it('answers the route its Location header names, and 404 for an unknown payment', async () => {
    const created = await pay('p-loc', JSON.stringify({ amount: 300, currency: 'usd' }));
    expect(created.status).toBe(201);
    const location = created.headers.get('location');
    expect(location).toMatch(/^\/payments\/pay_/);
    const shown = await fetch(`${url}${location}`);
    expect(shown.status).toBe(200);
    expect(await shown.json()).toEqual(await created.json());
    const missing = await fetch(`${url}/payments/pay_nope`);
    expect(missing.status).toBe(404);
    expect(missing.headers.get('content-type')).toMatch(/^application\/problem\+json/);
  });

  it('requires an Idempotency-Key', async () => {
    const response = await pay(undefined, JSON.stringify({ amount: 1, currency: 'EUR' }));
    expect(response.status).toBe(400);
    expect(((await response.json()) as { type: string }).type).toMatch(/key-missing$/);
    expect(await listPayments()).toEqual([]);
  });

  it.each([
    ['amount 0', '{"amount":0,"currency":"EUR"}'],
    ['a negative amount', '{"amount":-5,"currency":"EUR"}'],
    ['a fractional amount', '{"amount":1.5,"currency":"EUR"}'],
    ['an amount as a string', '{"amount":"10","currency":"EUR"}'],
    ['a missing amount', '{"currency":"EUR"}'],
    ['a four-letter currency', '{"amount":1,"currency":"EURO"}'],
    ['a currency with a digit', '{"amount":1,"currency":"E1R"}'],
    ['delay_ms above 5000', '{"amount":1,"currency":"EUR","delay_ms":5001}'],
    ['a negative delay_ms', '{"amount":1,"currency":"EUR","delay_ms":-1}'],
    ['an unknown field', '{"amount":1,"currency":"EUR","to":"x"}'],
    ['an array', '[1]'],
    ['broken JSON', '{"amount":'],
  ])('refuses %s with 400 problem+json and reserves nothing', async (_name, body) => {
    const response = await pay('bad', body);
    expect(response.status).toBe(400);
    expect(response.headers.get('content-type')).toMatch(/^application\/problem\+json/);
    expect(await response.json()).toEqual({
      type: 'urn:payments-example:problem:invalid-body',
      title: 'Invalid payment',
      status: 400,
      detail: expect.any(String),
    });
    expect(service.store.counts()).toEqual({ pending: 0, done: 0 });
    expect(await listPayments()).toEqual([]);
    // The client can fix the body and retry with the same key.
    expect((await pay('bad', '{"amount":1,"currency":"EUR"}')).status).toBe(201);
  });
});

describe('payments service process', () => {
  it('says in one line that its port is busy, and exits 1', async () => {
    const busy = createServer().listen(0, '127.0.0.1');
    await once(busy, 'listening');
    const { port } = busy.address() as AddressInfo;
    try {
      const main = fileURLToPath(new URL('../../examples/payments/main.ts', import.meta.url));
      const { code, stderr } = await runTs(main, [], {
        PORT: String(port),
        IDEM_DB: freshDbPath(dir),
      });
      expect(code).toBe(1);
      expect(stderr.trim()).toBe(
        `payments service: port ${port} on 127.0.0.1 is already in use; stop the other process or set PORT (0 picks a free one)`,
      );
    } finally {
      busy.close();
    }
  });
});

describe('npm run demo', () => {
  it('drives the service through every outcome and prints the table', async () => {
    const demo = fileURLToPath(new URL('../../examples/payments/demo.ts', import.meta.url));
    const { code, stdout, stderr } = await runTs(demo, []);
    expect(stderr).toBe('');
    expect(code).toBe(0);
    const line = (step: string) => stdout.split('\n').find((text) => text.startsWith(step)) ?? '';
    const id = /pay_[\w-]+/;
    expect(line('first request (key order-1)')).toMatch(/ 201 +- +pay_/);
    const firstId = id.exec(line('first request (key order-1)'))?.[0];
    expect(line('retry, same body')).toMatch(/ 201 +true +pay_/);
    expect(line('retry, same body')).toContain(firstId);
    expect(line('retry, JSON keys reordered')).toContain(firstId);
    expect(line('retry, JSON keys reordered')).toMatch(/ 201 +true /);
    expect(line('same key, different body')).toMatch(/ 422 +- +key-reused/);
    expect(line('slow first request (key order-2, 1 s)')).toMatch(/ 201 +- +pay_/);
    expect(line('concurrent duplicate while the first runs')).toMatch(
      / 409 +- +request-in-progress/,
    );
    const after = line('order-1 again after expiry and a sweep');
    expect(after).toMatch(/ 201 +- +pay_/);
    expect(after).not.toContain(firstId);
    expect(stdout).toContain('GET /payments: 3 payments actually executed');
    expect(stdout).toContain('died by SIGKILL before committing: connection dropped, no answer');
    expect(stdout).toContain('in the file after the crash: 0 payments, key pending');
    const crashRetry = /retry after restart and lease: 201 (pay_[\w-]+)/.exec(stdout)?.[1];
    expect(crashRetry).toMatch(id);
    expect(stdout).toContain(`retry once more: 201 replayed true ${crashRetry}`);
    expect(stdout).toContain('in the file now: 1 payment, key done');
  });
});
