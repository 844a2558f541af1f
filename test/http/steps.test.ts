// Steps at the HTTP layer (docs/steps.md), on every adapter with real HTTP: a handler that records
// a charge through a fake provider and a ledger row, then fails, leaves the key to its retry, which
// goes on from the recorded steps without charging again, and every later retry replays its answer.
import { once } from 'node:events';
import { mkdtempSync, rmSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { sql } from 'drizzle-orm';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { Step } from '../../src/core/steps.js';
import { idempotencyStep, idempotent } from '../../src/http/index.js';
import {
  openSqliteStore,
  type SqliteHandlerTransaction,
  type SqliteIdempotencyStore,
  sqliteSteps,
} from '../../src/sqlite/index.js';
import { fakeProvider } from '../support/fake-provider.js';
import { type Behaviour, serverKinds, type TestServer } from '../support/http-servers.js';
import { nestServerKinds } from '../support/nest-servers.js';

const SECRET = 'a secret of at least sixteen bytes';

const provider = fakeProvider();
let providerUrl = '';
const dirs: string[] = [];

beforeAll(async () => {
  provider.server.listen(0, '127.0.0.1');
  await once(provider.server, 'listening');
  providerUrl = `http://127.0.0.1:${(provider.server.address() as AddressInfo).port}`;
});

afterAll(async () => {
  provider.server.close();
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

function openStore(): SqliteIdempotencyStore<unknown> {
  const dir = mkdtempSync(join(tmpdir(), 'idem-http-steps-'));
  dirs.push(dir);
  const store = openSqliteStore(join(dir, 'keys.db'));
  store.db.run(sql`CREATE TABLE ledger (payment TEXT NOT NULL, charge TEXT NOT NULL)`);
  store.db.run(sql`CREATE TABLE outbox (payment TEXT NOT NULL)`);
  return store;
}

function count(store: SqliteIdempotencyStore<unknown>, table: 'ledger' | 'outbox', id: string) {
  const row = store.db.get<{ n: number }>(
    sql`SELECT count(*) AS n FROM ${sql.identifier(table)} WHERE payment = ${id}`,
  );
  return row?.n;
}

/** How a handler fails after its first two steps: a throw, or an answer whose status is not stored. */
type Failure = 'throws' | 'answers 503';

// The payment: a charge through the provider with the step's derived key, the ledger row in the
// step's transaction, then (unless this payment is to fail once after those two) the outbox row.
function payment(failOnce: Map<string, Failure>): Behaviour {
  return async (body, _path, stepOf) => {
    const { id } = body as { id: string };
    const step = stepOf() as Step<SqliteHandlerTransaction>;
    const charge = await step('charge', async ({ key }) => {
      const response = await fetch(`${providerUrl}/charge`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'idempotency-key': key },
        body: JSON.stringify({ order: id }),
      });
      return ((await response.json()) as { id: string }).id;
    });
    await step.tx('ledger', (tx) => {
      tx.run(sql`INSERT INTO ledger (payment, charge) VALUES (${id}, ${charge})`);
    });
    const failure = failOnce.get(id);
    failOnce.delete(id);
    if (failure === 'throws') throw new Error('the handler crashed after the ledger');
    if (failure === 'answers 503') {
      return { status: 503, headers: {}, kind: 'json', body: { retry: true } };
    }
    await step.tx('outbox', (tx) => {
      tx.run(sql`INSERT INTO outbox (payment) VALUES (${id})`);
    });
    return {
      status: 201,
      headers: {},
      kind: 'json',
      body: { id, charge, steps: [...step.recorded] },
    };
  };
}

async function pay(server: TestServer, key: string, id: string) {
  const response = await fetch(`${server.url}/run`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'idempotency-key': key },
    body: JSON.stringify({ id }),
  });
  return {
    status: response.status,
    replayed: response.headers.get('idempotent-replayed'),
    body: await response.text(),
  };
}

describe.each([...serverKinds, ...nestServerKinds])('steps on the $name', ({ name, start }) => {
  let server: TestServer | undefined;
  let store: SqliteIdempotencyStore<unknown> | undefined;

  afterEach(async () => {
    await server?.close();
    store?.close();
  });

  it.each<Failure>(['throws', 'answers 503'])(
    'goes on from the recorded steps after a handler that %s, and replays the answer',
    async (failure) => {
      store = openStore();
      const id = `${name.replace(/\W+/g, '-')}-${Math.random().toString(36).slice(2)}`;
      server = await start(
        store,
        { steps: sqliteSteps(store, { secret: SECRET }), leaseSeconds: 60 },
        payment(new Map([[id, failure]])),
      );

      const crashed = await pay(server, `pay-${id}`, id);
      expect(crashed.status).toBe(failure === 'throws' ? 500 : 503);
      expect(count(store, 'ledger', id)).toBe(1);
      expect(count(store, 'outbox', id)).toBe(0);

      // The failure ended the lease at once, so the retry takes the key over now, not in 60 s.
      const finished = await pay(server, `pay-${id}`, id);
      expect(finished.status).toBe(201);
      expect(finished.replayed).toBeNull();
      const answer = JSON.parse(finished.body) as { charge: string; steps: string[] };
      expect(answer.steps).toEqual(['charge', 'ledger', 'outbox']);

      for (let retry = 0; retry < 3; retry++) {
        const replayed = await pay(server, `pay-${id}`, id);
        expect(replayed).toEqual({ status: 201, replayed: 'true', body: finished.body });
      }
      // The provider was called once, with one derived key; each row was written once.
      expect(provider.requests.get(id)).toBe(1);
      expect(provider.executions.get(id)).toBe(1);
      expect(provider.keysOfOrder.get(id)?.size).toBe(1);
      expect(count(store, 'ledger', id)).toBe(1);
      expect(count(store, 'outbox', id)).toBe(1);
    },
  );

  it('refuses a step where the layer has no steps option', async () => {
    store = openStore();
    server = await start(store, {}, async (_body, _path, stepOf) => {
      stepOf();
      return { status: 201, headers: {}, kind: 'json', body: { ran: true } };
    });
    const refused = await pay(server, 'no-steps', 'x');
    expect(refused.status).toBe(500);
    // The key was released: no step was recorded, so the failed handler left nothing behind.
    expect(store.get('no-steps')).toBeNull();
  });
});

describe('the steps option', () => {
  it("must be a step log over the layer's store", () => {
    const store = openStore();
    const other = openStore();
    expect(() => idempotent(store, { steps: sqliteSteps(other, { secret: SECRET }) })).toThrow(
      /over the layer's store/,
    );
    store.close();
    other.close();
  });

  it('gives no step function to a request the layer did not run', () => {
    expect(() => idempotencyStep({})).toThrow(/no step function for this request/);
  });
});
