import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { quoteIdentifier } from '../../src/pg/identifier.js';
import { applyPgMigrations, PgIdempotencyStore } from '../../src/pg/index.js';
import { freshServerSchema, type ServerSchema, serverUrl } from '../support/pg.js';
import { httpReplays, REPLAY_DIGEST, storeReplays } from '../support/replays.js';

const url = serverUrl() as string;

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
    const claim = await store.acquire('k', REPLAY_DIGEST, {
      expires: 100,
      now: 1,
      leaseSeconds: 30,
    });
    if (claim.status !== 'acquired') throw new Error(`unexpected ${claim.status}`);
    const live = await version('k');
    for (let n = 0; n < 10; n += 1) {
      const again = await store.acquire('k', REPLAY_DIGEST, {
        expires: 100,
        now: 2,
        leaseSeconds: 30,
      });
      expect(again.status).toBe('inProgress');
    }
    expect(await version('k')).toEqual(live);
    expect(await store.finish('k', REPLAY_DIGEST, { paid: true }, claim.fencingToken)).toBe(true);
    const done = await version('k');
    await storeReplays(store, 'k');
    expect(await version('k')).toEqual(done);
  });

  it('HTTP replays through the layer leave the row untouched', async () => {
    const http = httpReplays(store, 'k2');
    await http.first();
    const stored = await version('k2');
    expect(stored).toBeDefined();
    await http.replays();
    expect(await version('k2')).toEqual(stored);
  });
});
