import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { idempotent } from '../../src/http/index.js';
import { applyPgMigrations, PgIdempotencyStore, quoteIdentifier } from '../../src/pg/index.js';
import { freshServerSchema, type ServerSchema, serverUrl } from '../support/pg.js';

const url = serverUrl() as string;
const digest = 'd'.repeat(64);

// A write to the row shows in its system columns: `xmin` changes with an update, `xmax` with the
// row lock an `INSERT … ON CONFLICT DO UPDATE … WHERE` takes even when its condition keeps the row.
interface Version {
  readonly xmin: string;
  readonly xmax: string;
}

describe('a replay reads, never writes, on the PostgreSQL server', () => {
  let target: ServerSchema;
  let store: PgIdempotencyStore;
  beforeEach(async () => {
    target = await freshServerSchema(url, 4);
    await applyPgMigrations(target.db, { schema: target.schema });
    store = new PgIdempotencyStore(target.db, { schema: target.schema });
  });
  afterEach(async () => {
    await target.drop();
  });

  async function version(id: string): Promise<Version | undefined> {
    const { rows } = await target.pool.query<Version>(
      `SELECT xmin::text AS xmin, xmax::text AS xmax FROM ${quoteIdentifier(target.schema)}.keys WHERE id = $1`,
      [id],
    );
    return rows[0];
  }

  it('the retry of a finished key, another payload, and a live lease leave the row untouched', async () => {
    const claim = await store.acquire('k', digest, { expires: 100, now: 1, leaseSeconds: 30 });
    if (claim.status !== 'acquired') throw new Error(`unexpected ${claim.status}`);
    const live = await version('k');
    for (let n = 0; n < 10; n += 1) {
      const again = await store.acquire('k', digest, { expires: 100, now: 2, leaseSeconds: 30 });
      expect(again.status).toBe('inProgress');
    }
    expect(await version('k')).toEqual(live);
    expect(await store.finish('k', digest, { paid: true }, claim.attempt)).toBe(true);
    const done = await version('k');
    for (let n = 0; n < 20; n += 1) {
      const replay = await store.acquire('k', digest, { expires: 100, now: 3, leaseSeconds: 30 });
      expect(replay.status).toBe('done');
      const other = await store.acquire('k', 'e'.repeat(64), {
        expires: 100,
        now: 3,
        leaseSeconds: 30,
      });
      expect(other.status).toBe('mismatch');
    }
    expect(await version('k')).toEqual(done);
  });

  it('HTTP replays through the layer leave the row untouched', async () => {
    const layer = idempotent(store, { now: () => 5 });
    const request = {
      method: 'POST',
      path: '/pay',
      headers: { 'idempotency-key': 'k2' },
      body: { amount: 1 },
    };
    const handler = async () => ({ status: 201, body: { paid: true } });
    const first = await layer.handle(request, handler);
    expect(first.response.status).toBe(201);
    const stored = await version('k2');
    expect(stored).toBeDefined();
    for (let n = 0; n < 20; n += 1) {
      const replay = await layer.handle(request, handler);
      expect(replay.outcome).toBe('replayed');
    }
    expect(await version('k2')).toEqual(stored);
  });
});
