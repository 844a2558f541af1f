import { sql } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { makeIdempotent } from '../../src/function/index.js';
import { fetchTransaction } from '../../src/http/fetch.js';
import { queryRows } from '../../src/pg/client.js';
import { quoteIdentifier } from '../../src/pg/identifier.js';
import {
  type AnyNeonHttpDatabase,
  applyNeonHttpMigrations,
  applyPgMigrations,
  neonHttpTransaction,
  PgIdempotencyStore,
  pgKeysTable,
} from '../../src/pg/index.js';
import { neonConnection } from '../support/neon-harness.js';
import { freshServerSchema, serverUrl, uniqueName } from '../support/pg.js';

// Collected only when DATABASE_URL is set (see vitest.config.ts).
const url = serverUrl() as string;

const neonServed = neonConnection(url);
const neonDb = neonServed.db;

describe('applyNeonHttpMigrations', () => {
  const journal = async (db: AnyNeonHttpDatabase, schema: string, name = 'keys') =>
    queryRows<{ created_at: string }>(
      db,
      sql.raw(
        `SELECT created_at FROM ${quoteIdentifier(schema)}.${quoteIdentifier(`__idempotency_migrations${name === 'keys' ? '' : `_${name}`}`)} ORDER BY created_at`,
      ),
    );

  it('migrates a fresh schema in one batch, then only reads: the same journal as applyPgMigrations', async () => {
    const db = await neonDb();
    const fresh = await freshServerSchema(url);
    const reference = await freshServerSchema(url);
    try {
      await fresh.pool.query(`DROP SCHEMA ${quoteIdentifier(fresh.schema)}`);
      const served = { ...neonServed.endpoint?.served };
      await applyNeonHttpMigrations(db, { schema: fresh.schema });
      expect((neonServed.endpoint?.served.batches ?? 0) - (served.batches ?? 0)).toBe(1);
      const after = { ...neonServed.endpoint?.served };
      await applyNeonHttpMigrations(db, { schema: fresh.schema });
      expect(neonServed.endpoint?.served.batches).toBe(after.batches);
      await applyPgMigrations(reference.db, { schema: reference.schema });
      expect(await journal(db, fresh.schema)).toEqual(await journal(db, reference.schema));
      // The node-postgres migrator finds nothing to do on what neon-http made.
      await applyPgMigrations(fresh.db, { schema: fresh.schema });
      expect((await journal(db, fresh.schema)).length).toBe(
        (await journal(db, reference.schema)).length,
      );
    } finally {
      await fresh.pool.query(`DROP SCHEMA IF EXISTS ${quoteIdentifier(fresh.schema)} CASCADE`);
      await fresh.pool.end();
      await reference.drop();
    }
  });

  it('lets three instances migrate at once: each migration is recorded once', async () => {
    const db = await neonDb();
    const fresh = await freshServerSchema(url);
    try {
      const table = pgKeysTable('idem_keys', { schema: fresh.schema });
      await Promise.all([1, 2, 3].map(() => applyNeonHttpMigrations(db, { table })));
      const rows = await journal(db, fresh.schema, 'idem_keys');
      expect(new Set(rows.map((row) => row.created_at)).size).toBe(rows.length);
      expect(rows.length).toBeGreaterThan(0);
      const store = new PgIdempotencyStore(db, { table });
      expect(await store.reserve('k', 'd', Date.now() / 1000 + 60)).toBe(true);
    } finally {
      await fresh.drop();
    }
  });

  it('refuses a foreign table of the same name before writing', async () => {
    const db = await neonDb();
    const fresh = await freshServerSchema(url);
    try {
      await fresh.pool.query(`CREATE TABLE ${quoteIdentifier(fresh.schema)}.keys (id int)`);
      await expect(applyNeonHttpMigrations(db, { schema: fresh.schema })).rejects.toThrow(
        /cannot be used as an idempotency store/,
      );
      const [found] = await queryRows<{ found: boolean }>(
        db,
        sql`SELECT to_regclass(${`${fresh.schema}.__idempotency_migrations`}) IS NOT NULL AS found`,
      );
      expect(found?.found).toBe(false);
    } finally {
      await fresh.drop();
    }
  });
});

describe('neonHttpTransaction', () => {
  const schema = uniqueName('serverless_neontx');
  const table = pgKeysTable('idem_keys', { schema });
  const effects = `${quoteIdentifier(schema)}.effects`;
  let db: AnyNeonHttpDatabase;
  let store: PgIdempotencyStore;
  const now = () => Date.now() / 1000;
  const effectRows = async () =>
    queryRows<{ id: string; amount: number }>(
      db,
      sql.raw(`SELECT id, amount FROM ${effects} ORDER BY id`),
    );
  const lease = async (key: string) => {
    const acquired = await store.acquire(key, 'd', {
      expires: now() + 600,
      now: now(),
      leaseSeconds: 30,
    });
    if (acquired.status !== 'acquired') throw new Error(`not acquired: ${acquired.status}`);
    return { key, fingerprint: 'd', fencingToken: acquired.fencingToken };
  };
  const credit = (id: string, amount: number) =>
    db.execute(sql`INSERT INTO ${sql.raw(effects)} (id, amount) VALUES (${id}, ${amount})`);

  beforeAll(async () => {
    db = await neonDb();
    await applyNeonHttpMigrations(db, { table });
    await db.execute(sql.raw(`CREATE TABLE ${effects} (id text PRIMARY KEY, amount int NOT NULL)`));
    store = new PgIdempotencyStore(db, { table });
  });
  afterAll(async () => {
    await db.execute(sql.raw(`DROP SCHEMA ${quoteIdentifier(schema)} CASCADE`));
  });

  it('commits the handler’s writes and the answer together, in one batch', async () => {
    const owner = await lease('t-commit');
    const before = neonServed.endpoint?.served.batches ?? 0;
    const outcome = await neonHttpTransaction(store).run(
      owner,
      (tx) => {
        tx.add(credit('t-commit', 7));
        return { credited: 7 };
      },
      JSON.stringify,
    );
    expect(outcome).toEqual({ committed: true, result: { credited: 7 } });
    expect(neonServed.endpoint?.served.batches).toBe(before + 1);
    expect(await effectRows()).toContainEqual({ id: 't-commit', amount: 7 });
    const row = await store.get('t-commit');
    expect(row?.status).toBe('done');
    expect(row?.response).toEqual({ credited: 7 });
  });

  it('commits nothing when the fence no longer matches (the lease was taken over)', async () => {
    const owner = await lease('t-fenced');
    // A takeover meanwhile: the row's fencing token moved on.
    await db.execute(sql`UPDATE ${table} SET attempt = attempt + 1 WHERE id = ${'t-fenced'}`);
    const outcome = await neonHttpTransaction(store).run(
      owner,
      (tx) => {
        tx.add(credit('t-fenced', 9));
        return { credited: 9 };
      },
      JSON.stringify,
    );
    expect(outcome).toEqual({ committed: false });
    expect((await effectRows()).some((row) => row.id === 't-fenced')).toBe(false);
    const row = await store.get('t-fenced');
    expect(row?.status).toBe('pending');
  });

  it('commits nothing when the key was released meanwhile', async () => {
    const owner = await lease('t-released');
    await store.releasePending('t-released');
    const outcome = await neonHttpTransaction(store).run(
      owner,
      (tx) => {
        tx.add(credit('t-released', 3));
        return 'ok';
      },
      JSON.stringify,
    );
    expect(outcome).toEqual({ committed: false });
    expect((await effectRows()).some((row) => row.id === 't-released')).toBe(false);
    expect(await store.get('t-released')).toBeNull();
  });

  it('rethrows a failing statement of the handler and leaves the key pending, nothing committed', async () => {
    await credit('t-taken', 1);
    const owner = await lease('t-dup');
    await expect(
      neonHttpTransaction(store).run(
        owner,
        (tx) => {
          tx.add(credit('t-dup', 2), credit('t-taken', 2));
          return 'never';
        },
        JSON.stringify,
      ),
    ).rejects.toThrow();
    expect((await effectRows()).some((row) => row.id === 't-dup')).toBe(false);
    expect((await store.get('t-dup'))?.status).toBe('pending');
  });

  it('drives makeIdempotent: the effect once, the answer replayed', async () => {
    let runs = 0;
    const pay = makeIdempotent(
      async (tx, message: { id: string; amount: number }) => {
        runs += 1;
        tx.add(credit(message.id, message.amount));
        return { credited: message.amount };
      },
      { transaction: neonHttpTransaction(store), key: (message) => message.id },
    );
    expect(await pay({ id: 't-make', amount: 5 })).toEqual({ credited: 5 });
    expect(await pay({ id: 't-make', amount: 5 })).toEqual({ credited: 5 });
    expect(runs).toBe(1);
    expect((await effectRows()).filter((row) => row.id === 't-make')).toEqual([
      { id: 't-make', amount: 5 },
    ]);
  });

  it('reports a batch that committed but lost its answer as committed, from what the row holds', async () => {
    const owner = await lease('t-lost');
    neonServed.endpoint?.dropNextBatchAnswer();
    const outcome = await neonHttpTransaction(store).run(
      owner,
      (tx) => {
        tx.add(credit('t-lost', 4));
        return { credited: 4 };
      },
      JSON.stringify,
    );
    expect(outcome).toEqual({ committed: true, result: { credited: 4 } });
    expect(await effectRows()).toContainEqual({ id: 't-lost', amount: 4 });
    expect((await store.get('t-lost'))?.status).toBe('done');
  });

  it('gives makeIdempotent the result of a batch whose answer was lost, and replays it', async () => {
    let runs = 0;
    const pay = makeIdempotent(
      async (tx, message: { id: string; amount: number }) => {
        runs += 1;
        tx.add(credit(message.id, message.amount));
        return { credited: message.amount };
      },
      { transaction: neonHttpTransaction(store), key: (message) => message.id },
    );
    neonServed.endpoint?.dropNextBatchAnswer();
    expect(await pay({ id: 't-lost-make', amount: 6 })).toEqual({ credited: 6 });
    expect(await pay({ id: 't-lost-make', amount: 6 })).toEqual({ credited: 6 });
    expect(runs).toBe(1);
    expect((await effectRows()).filter((row) => row.id === 't-lost-make')).toEqual([
      { id: 't-lost-make', amount: 6 },
    ]);
  });

  it('answers a request whose batch committed but lost its answer with the handler’s answer, not 409', async () => {
    let runs = 0;
    const post = fetchTransaction(
      neonHttpTransaction(store),
      async (_request, tx) => {
        runs += 1;
        tx.add(credit('t-lost-http', 8));
        return { status: 201, body: { credited: 8 } };
      },
      { scope: 'global' },
    );
    const request = () =>
      new Request('http://payments.test/credits', {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'idempotency-key': '"t-lost-http"' },
        body: '{"amount":8}',
      });
    neonServed.endpoint?.dropNextBatchAnswer();
    const first = await post(request());
    expect(first.status).toBe(201);
    expect(await first.json()).toEqual({ credited: 8 });
    const replay = await post(request());
    expect(replay.headers.get('idempotent-replayed')).toBe('true');
    expect(await replay.json()).toEqual({ credited: 8 });
    expect(runs).toBe(1);
  });

  it('is refused over a driver without batch', async () => {
    const fresh = await freshServerSchema(url);
    try {
      expect(() => neonHttpTransaction(new PgIdempotencyStore(fresh.db))).toThrow(/neon-http/);
    } finally {
      await fresh.drop();
    }
  });
});
