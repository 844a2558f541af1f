import { drizzle } from 'drizzle-orm/node-postgres';
import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { applyPgMigrations, PgIdempotencyStore } from '../../src/pg/index.js';
import { freshServerSchema, serverUrl } from '../support/pg.js';

const url = serverUrl() as string;

// What a transaction pooler does to a named statement, made deterministic on one connection: the
// client believes a statement parsed that its server session no longer holds (26000), or a
// session already holds a name the client is about to parse (42P05).
describe('named statements on PostgreSQL', () => {
  async function withClient(
    use: (client: pg.Client, store: PgIdempotencyStore, schema: string) => Promise<void>,
    options: { prepare?: boolean } = {},
  ): Promise<void> {
    const fresh = await freshServerSchema(url, 1);
    const client = new pg.Client({ connectionString: url });
    await client.connect();
    try {
      await applyPgMigrations(fresh.db, { schema: fresh.schema });
      await use(
        client,
        new PgIdempotencyStore(drizzle({ client }), { schema: fresh.schema, ...options }),
        fresh.schema,
      );
    } finally {
      await client.end();
      await fresh.drop();
    }
  }

  const prepared = async (client: pg.Client) =>
    (
      await client.query<{ name: string }>('SELECT name FROM pg_prepared_statements ORDER BY name')
    ).rows.map((row) => row.name);

  it('names each statement per process and connection, and parses it once', async () => {
    await withClient(async (client, store) => {
      expect(await store.reserve('a', 'd', 100)).toBe(true);
      expect(await store.reserve('b', 'd', 100)).toBe(true);
      const names = await prepared(client);
      expect(names).toHaveLength(1);
      expect(names[0]).toMatch(/^idempotency_[0-9a-f]{12}_reserve_[0-9a-f]{8}[0-9a-z]+$/);
    });
  });

  it('sends a statement the session no longer holds (26000) again unnamed, then names none', async () => {
    await withClient(async (client, store) => {
      expect(await store.reserve('a', 'd', 100)).toBe(true);
      await client.query('DEALLOCATE ALL');
      expect(await store.reserve('a', 'd', 100)).toBe(false);
      expect(await store.reserve('b', 'd', 100)).toBe(true);
      expect(await store.finish('b', 'd', { ok: 1 })).toBe(true);
      expect(await store.fetch('b', 10)).toEqual({ ok: 1 });
      expect(await prepared(client)).toEqual([]);
    });
  });

  it('sends a statement whose name the session already holds (42P05) again unnamed', async () => {
    await withClient(async (client, store) => {
      expect(await store.reserve('a', 'd', 100)).toBe(true);
      const [reserve = ''] = await prepared(client);
      // A name the client has not parsed but its session holds, with another text: what another
      // client leaves on a server connection a pooler shares.
      const get = reserve.replace('_reserve_', '_get_');
      await client.query(`PREPARE ${get} AS SELECT 1`);
      expect(await store.get('a')).toMatchObject({ key: 'a', status: 'pending' });
      expect(await store.finish('a', 'd', { ok: 1 })).toBe(true);
      expect(await prepared(client)).toEqual([get, reserve].sort());
    });
  });

  it('with prepare: false names no statement at all', async () => {
    await withClient(
      async (client, store) => {
        expect(await store.reserve('a', 'd', 100)).toBe(true);
        expect(await store.finish('a', 'd', { ok: 1 })).toBe(true);
        expect(await store.counts()).toEqual({ pending: 0, done: 1 });
        expect(await prepared(client)).toEqual([]);
      },
      { prepare: false },
    );
  });
});
