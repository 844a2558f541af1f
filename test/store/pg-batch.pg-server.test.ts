import { drizzle as drizzlePostgresJs } from 'drizzle-orm/postgres-js';
import postgres from 'postgres';
import { expect, it } from 'vitest';
import {
  type AnyPgDatabase,
  applyPgMigrations,
  openPgStore,
  PgIdempotencyStore,
} from '../../src/pg/index.js';
import { freshServerDatabase, freshServerSchema, readPgRows, serverUrl } from '../support/pg.js';
import {
  type BatchingStoreDatabase,
  carried,
  claim,
  describeBatchingStore,
  keysOf,
} from './batching-store-suite.js';

// Collected only when DATABASE_URL is set (see vitest.config.ts); then an unreachable server fails.
const url = serverUrl() as string;

// The batching store over node-postgres, or over a postgres-js client of its own; the plain store
// and the test's own reads go through node-postgres.
const openOver =
  (driver: 'node-postgres' | 'postgres-js') =>
  async (): Promise<BatchingStoreDatabase<PgIdempotencyStore<unknown>>> => {
    const direct = await freshServerSchema(url, 2);
    await applyPgMigrations(direct.db, { schema: direct.schema });
    let db: AnyPgDatabase = direct.db;
    let end: () => Promise<unknown> = async () => undefined;
    if (driver === 'postgres-js') {
      const client = postgres(url, { max: 2, onnotice: () => undefined });
      db = drizzlePostgresJs({ client });
      end = () => client.end();
    }
    const store = new PgIdempotencyStore(db, { schema: direct.schema, batch: true });
    return {
      store,
      plain: new PgIdempotencyStore(direct.db, { schema: direct.schema }),
      rows: () => readPgRows(direct.db, direct.schema),
      refuseLongAnswers: async () => {
        await direct.pool.query(
          `ALTER TABLE "${direct.schema}".keys ADD CONSTRAINT short_answer CHECK (length(response) < 40)`,
        );
      },
      drop: async () => {
        await store.close();
        await end();
        await direct.drop();
      },
    };
  };

describeBatchingStore<PgIdempotencyStore<unknown>>({
  name: 'PostgreSQL',
  paths: {
    'over node-postgres': openOver('node-postgres'),
    'over postgres-js': openOver('postgres-js'),
  },
  // A claim is one insert-or-read; a burst of new keys has no lease to take over.
  claimStart: 'claims',
  burstStats: { takeovers: { calls: 0, statements: 0 } },
  refusal: { field: 'code', state: '23514' },
  empty: async () => {
    const direct = await freshServerSchema(url, 1);
    return {
      store: (options) => new PgIdempotencyStore(direct.db, { schema: direct.schema, ...options }),
      drop: () => direct.drop(),
    };
  },
  openFromUrl: async () => {
    const database = await freshServerDatabase(url);
    const store = await openPgStore(database.url, { batch: true, poolSize: 2 });
    return {
      store,
      drop: async () => {
        await store.close();
        await database.drop();
      },
    };
  },
  more: (current) => {
    it('takes over the lapsed leases of many keys in one statement', async () => {
      const { store, plain } = current();
      const keys = keysOf('lapsed', 8);
      for (const key of keys) await plain.acquire(key, 'd', { ...claim, leaseSeconds: 5 });
      const taken = await Promise.all(
        keys.map((key) => store.acquire(key, 'd', { ...claim, now: 30 })),
      );
      for (const result of taken)
        expect(result).toMatchObject({ status: 'acquired', takenOver: true });
      // The first claim went alone, the other seven as one statement. Their takeovers follow as
      // the claims are answered: how they group depends on when the answers arrive, but eight
      // calls took fewer statements.
      expect(store.batchStats()?.claims.sizes).toEqual({ 1: 1, 7: 1 });
      const takeovers = store.batchStats()?.takeovers;
      expect(takeovers?.calls).toBe(8);
      expect(takeovers?.statements).toBeLessThan(8);
      expect(carried(takeovers?.sizes)).toBe(8);
      // The new owners' leases, at the takeover's own clock.
      const records = await Promise.all(keys.map((key) => plain.get(key)));
      expect(records.map((record) => record?.leaseUntil)).toEqual(keys.map(() => 630));
    });
  },
});
