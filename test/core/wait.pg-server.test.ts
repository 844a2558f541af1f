import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { idempotent } from '../../src/http/index.js';
import { quoteIdentifier } from '../../src/pg/identifier.js';
import { applyPgMigrations, PgIdempotencyStore } from '../../src/pg/index.js';
import { countedStore } from '../support/counted-store.js';
import { freshServerSchema, type ServerSchema, serverUrl } from '../support/pg.js';
import { deferred, until, watched } from '../support/waiting.js';

const url = serverUrl() as string;

const WAITERS = 100;

// What a waiter that wrote would change on the row: `xmin` for an update, `xmax` for the row lock
// an `INSERT … ON CONFLICT DO UPDATE` takes even when its condition keeps the row as it is.
interface Version {
  readonly xmin: string;
  readonly xmax: string;
  readonly status: string;
}

describe('waiting duplicates on the PostgreSQL server', () => {
  let target: ServerSchema;
  let store: PgIdempotencyStore;
  beforeEach(async () => {
    target = await freshServerSchema(url, 8);
    await applyPgMigrations(target.db, { schema: target.schema });
    store = new PgIdempotencyStore(target.db, { schema: target.schema });
  });
  afterEach(async () => {
    await target.drop();
  });

  async function version(): Promise<Version | undefined> {
    const { rows } = await target.pool.query<Version>(
      `SELECT xmin::text AS xmin, xmax::text AS xmax, status FROM ${quoteIdentifier(target.schema)}.keys WHERE id = 'k1'`,
    );
    return rows[0];
  }

  it(`${WAITERS} waiters behind a live owner neither update nor lock its row, then replay`, async () => {
    // The store as the layer sees it, counting its calls: proof that the waiters are waiting.
    const counted = countedStore(store);
    const layer = idempotent(counted.store, { wait: { timeoutMs: 120_000, intervalMs: 10 } });
    const gate = deferred();
    let runs = 0;
    const request = {
      method: 'POST',
      path: '/pay',
      headers: { 'idempotency-key': 'k1' },
      body: { amount: 1 },
    };
    const handler = async () => {
      runs += 1;
      await gate.promise;
      return { status: 201, body: { paid: true } };
    };
    const owner = layer.handle(request, handler);
    await until(() => runs === 1);
    const waiters = Array.from({ length: WAITERS }, () => watched(layer.handle(request, handler)));
    // A duplicate that does not wait answers at once (409): none may answer before the release.
    const answered = () => waiters.some((waiter) => waiter.settled());
    try {
      // Every waiter made its one claim (a write, before the wait).
      await until(() => counted.calls('acquire') >= WAITERS + 1 || answered());
      expect(answered()).toBe(false);
      const held = await version();
      expect(held?.status).toBe('pending');
      // Then, while the owner holds its lease, they only read: the row keeps its version and no
      // lock is taken on it. Waiters polling with writes end this wait through their acquires.
      await until(
        () =>
          counted.calls('get') >= 3 * WAITERS ||
          counted.calls('acquire') > 3 * WAITERS ||
          answered(),
      );
      expect(await version()).toEqual(held);
      expect(counted.calls('acquire')).toBe(WAITERS + 1);
      expect(answered()).toBe(false);
    } finally {
      // Settled before the schema is dropped, whatever the checks found.
      gate.resolve();
      await Promise.allSettled([owner, ...waiters.map((waiter) => waiter.promise)]);
    }
    const results = await Promise.all(waiters.map((waiter) => waiter.promise));
    expect((await owner).outcome).toBe('executed');
    expect(results.every((result) => result.outcome === 'replayed')).toBe(true);
    expect(runs).toBe(1);
    expect((await version())?.status).toBe('done');
  });
});
