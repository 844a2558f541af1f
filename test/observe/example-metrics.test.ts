import { once } from 'node:events';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { createPaymentsApp } from '../../examples/payments/app.js';
import { sqlitePayments } from '../../examples/payments/backend.js';
import { openSqliteStore } from '../../src/sqlite/index.js';
import { freshDbPath, tempDir } from '../support/temp.js';

const dir = tempDir('idem-example-metrics-');
const cleanups: (() => Promise<void>)[] = [];

afterEach(async () => {
  for (const cleanup of cleanups.splice(0)) await cleanup();
});

describe('payments example /metrics', () => {
  it('serves the store gauges in the Prometheus text format', async () => {
    const store = openSqliteStore(freshDbPath(dir));
    const server = createPaymentsApp(sqlitePayments(store), {
      ttlSeconds: 60,
      now: () => 1_000,
    }).listen(0, '127.0.0.1');
    cleanups.push(async () => {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
      store.close();
    });
    await once(server, 'listening');
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    const paid = await fetch(`${url}/payments`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'idempotency-key': 'k1' },
      body: JSON.stringify({ amount: 5, currency: 'eur' }),
    });
    expect(paid.status).toBe(201);
    const metrics = await fetch(`${url}/metrics`);
    expect(metrics.status).toBe(200);
    expect(metrics.headers.get('content-type')).toMatch(/^text\/plain; version=0\.0\.4/);
    const text = await metrics.text();
    expect(text).toContain('\nidempotency_done_keys 1\n');
    expect(text).toContain('\nidempotency_pending_keys 0\n');
  });
});
