import { sql } from 'drizzle-orm';
import { drizzle } from 'drizzle-orm/node-postgres';
import pg from 'pg';
import { afterAll, describe, expect, it } from 'vitest';
import { DatabaseOpenError, InvalidOptionError, SchemaMismatchError } from '../../src/index.js';
import { directNodePgClient } from '../../src/pg/compile.js';
import { quoteIdentifier } from '../../src/pg/identifier.js';
import { applyPgMigrations, openPgStore, PgIdempotencyStore } from '../../src/pg/index.js';
import { fixture, runTs } from '../support/child.js';
import {
  freshServerDatabase,
  freshServerSchema,
  readPgRows,
  serverUrl,
  uniqueName,
} from '../support/pg.js';
import { inspectSchema } from '../support/pg-inspect.js';

const url = serverUrl() as string;
const admin = new pg.Pool({ connectionString: url, max: 2 });
const adminDb = drizzle({ client: admin });
const created: string[] = [];
afterAll(async () => {
  for (const schema of created)
    await admin.query(`DROP SCHEMA IF EXISTS ${quoteIdentifier(schema)} CASCADE`);
  await admin.end();
});

function newSchema(): string {
  const schema = uniqueName('o');
  created.push(schema);
  return schema;
}

const MIGRATED = {
  tables: ['__idempotency_migrations', 'keys'],
  indexes: [
    '__idempotency_migrations_pkey',
    'keys_done_id_expires_idx',
    'keys_pkey',
    'keys_status_expires_id_idx',
  ],
  migrations: 5,
};

describe('openPgStore on the real server', () => {
  it('creates the schema and table from a URL, and close() ends the pool it created', async () => {
    const schema = newSchema();
    const store = await openPgStore<{ receipt: number }>(url, { schema, poolSize: 2 });
    expect(await inspectSchema(adminDb, schema)).toEqual(MIGRATED);
    expect(await store.reserve('k', 'd', 10)).toBe(true);
    expect(await store.finish('k', 'd', { receipt: 3 })).toBe(true);
    const pool = (store.db as unknown as { $client: pg.Pool }).$client;
    expect(pool.options.max).toBe(2);
    await store.close();
    expect(pool.ended).toBe(true);
    const again = await openPgStore<{ receipt: number }>(url, { schema });
    expect(await again.fetch('k', 0)).toEqual({ receipt: 3 });
    await again.close();
    expect(await inspectSchema(adminDb, schema)).toEqual(MIGRATED);
  });

  it('shares a pool you pass and leaves it open on close()', async () => {
    const schema = newSchema();
    const pool = new pg.Pool({ connectionString: url, max: 2 });
    const store = await openPgStore(pool, { schema });
    await store.reserve('k', 'd', 10);
    await store.close();
    expect(pool.ended).toBe(false);
    const { rows } = await pool.query(`SELECT id FROM ${schema}.keys`);
    expect(rows).toEqual([{ id: 'k' }]);
    await pool.end();
  });

  it('uses the public schema by default', async () => {
    const database = await freshServerDatabase(url);
    try {
      const store = await openPgStore(database.url);
      await store.reserve('k', 'd', 10);
      await store.close();
      const pool = new pg.Pool({ connectionString: database.url, max: 1 });
      const db = drizzle({ client: pool });
      expect(await inspectSchema(db, 'public')).toEqual(MIGRATED);
      expect(await readPgRows(db, 'public')).toHaveLength(1);
      await pool.end();
    } finally {
      await database.drop();
    }
  });

  it('refuses bad options before connecting, and an unreachable server with DatabaseOpenError', async () => {
    await expect(openPgStore(url, { schema: '' })).rejects.toBeInstanceOf(InvalidOptionError);
    await expect(openPgStore(url, { poolSize: 0 })).rejects.toBeInstanceOf(InvalidOptionError);
    await expect(openPgStore('')).rejects.toBeInstanceOf(DatabaseOpenError);
    await expect(openPgStore('postgres://postgres@127.0.0.1:1/test')).rejects.toBeInstanceOf(
      DatabaseOpenError,
    );
  });

  it('refuses a foreign keys table and writes nothing', async () => {
    const target = await freshServerSchema(url, 1);
    try {
      await target.pool.query(
        `CREATE TABLE ${target.schema}.keys (id text PRIMARY KEY, value text)`,
      );
      await target.pool.query(`INSERT INTO ${target.schema}.keys VALUES ('a', 'b')`);
      const before = await inspectSchema(target.db, target.schema);
      await expect(openPgStore(url, { schema: target.schema })).rejects.toThrow(
        SchemaMismatchError,
      );
      expect(await inspectSchema(target.db, target.schema)).toEqual(before);
      const { rows } = await target.pool.query(`SELECT * FROM ${target.schema}.keys`);
      expect(rows).toEqual([{ id: 'a', value: 'b' }]);
    } finally {
      await target.drop();
    }
  });

  it('lets three processes migrate one fresh schema at once', async () => {
    const schema = newSchema();
    const results = await Promise.all(
      [1, 2, 3].map(() => runTs(fixture('init-pg-store.ts'), [url, schema])),
    );
    for (const result of results) {
      expect(result.stderr).toBe('');
      expect(result.code).toBe(0);
      expect(JSON.parse(result.stdout)).toEqual({ pending: 0, done: 0 });
    }
    expect(await inspectSchema(adminDb, schema)).toEqual(MIGRATED);
  });
});

describe('PgIdempotencyStore over your own node-postgres database', () => {
  it('keeps stores of different schemas apart on one pool (named statements per schema)', async () => {
    const [a, b] = [newSchema(), newSchema()];
    const pool = new pg.Pool({ connectionString: url, max: 1 });
    const db = drizzle({ client: pool });
    await applyPgMigrations(db, { schema: a });
    await applyPgMigrations(db, { schema: b });
    const first = new PgIdempotencyStore(db, { schema: a });
    const second = new PgIdempotencyStore(db, { schema: b });
    expect(await first.reserve('k', 'one', 10)).toBe(true);
    expect(await second.reserve('k', 'two', 10)).toBe(true);
    expect((await first.get('k'))?.fingerprint).toBe('one');
    expect((await second.get('k'))?.fingerprint).toBe('two');
    await first.close();
    await second.close();
    expect(pool.ended).toBe(false);
    await pool.end();
  });

  it('joins your transaction: a rollback takes the reservation with it', async () => {
    const target = await freshServerSchema(url, 2);
    try {
      await applyPgMigrations(target.db, { schema: target.schema });
      const orders = `${target.schema}.orders`;
      await target.pool.query(`CREATE TABLE ${orders} (id int PRIMARY KEY)`);
      await expect(
        target.db.transaction(async (tx) => {
          await tx.execute(sql.raw(`INSERT INTO ${orders} VALUES (1)`));
          await new PgIdempotencyStore(tx, { schema: target.schema }).reserve('order-1', 'd', 10);
          throw new Error('payment declined');
        }),
      ).rejects.toThrow('payment declined');
      await target.db.transaction(async (tx) => {
        await tx.execute(sql.raw(`INSERT INTO ${orders} VALUES (2)`));
        const store = new PgIdempotencyStore(tx, { schema: target.schema });
        await store.reserve('order-2', 'd', 10);
        await store.finish('order-2', 'd', { order: 2 });
      });
      expect((await readPgRows(target.db, target.schema)).map((row) => row.id)).toEqual([
        'order-2',
      ]);
      expect((await target.pool.query(`SELECT id FROM ${orders}`)).rows).toEqual([{ id: 2 }]);
    } finally {
      await target.drop();
    }
  });
});

describe('the per-request statements sent straight to node-postgres', () => {
  it('takes the direct path for a drizzle node-postgres database, not for a transaction or a logger', async () => {
    const pool = new pg.Pool({ connectionString: url, max: 1 });
    try {
      const client = new pg.Client({ connectionString: url });
      expect(directNodePgClient(drizzle({ client: pool }))).toBe(pool);
      expect(directNodePgClient(drizzle({ client }))).toBe(client);
      expect(directNodePgClient(drizzle({ client: pool, logger: true }))).toBeUndefined();
      const inside = await drizzle({ client: pool }).transaction(async (tx) =>
        directNodePgClient(tx),
      );
      expect(inside).toBeUndefined();
    } finally {
      await pool.end();
    }
  });

  it('reads strings and numbers whatever type parsers the pool has', async () => {
    const target = await freshServerSchema(url, 1);
    // Every value this pool reads comes back wrapped, unless the query brings its own parsers.
    const wrapping = new pg.Pool({
      connectionString: url,
      max: 1,
      types: { getTypeParser: () => (value: string) => `<${value}>` },
    });
    try {
      await applyPgMigrations(target.db, { schema: target.schema });
      expect((await wrapping.query('SELECT 1.5::float8 AS x')).rows).toEqual([{ x: '<1.5>' }]);
      const store = new PgIdempotencyStore<{ receipt: number }>(drizzle({ client: wrapping }), {
        schema: target.schema,
      });
      expect(await store.reserve('k', 'd', 10.5)).toBe(true);
      expect(await store.finish('k', 'd', { receipt: 7 })).toBe(true);
      expect(await store.fetch('k', 10)).toEqual({ receipt: 7 });
      expect(await store.get('k')).toEqual({
        key: 'k',
        fingerprint: 'd',
        status: 'done',
        expires: 10.5,
        response: { receipt: 7 },
        leaseUntil: null,
        fencingToken: 1,
        unrecorded: false,
      });
      expect(await store.reserve('p', 'd', 10)).toBe(true);
      expect(await store.release('p', 'd')).toBe(true);
      expect(await store.get('p')).toBeNull();
    } finally {
      await wrapping.end();
      await target.drop();
    }
  });

  it('runs on a single node-postgres Client too, and a logger still sees every statement', async () => {
    const target = await freshServerSchema(url, 1);
    const client = new pg.Client({ connectionString: url });
    await client.connect();
    try {
      await applyPgMigrations(target.db, { schema: target.schema });
      const direct = new PgIdempotencyStore(drizzle({ client }), { schema: target.schema });
      expect(await direct.reserve('k', 'd', 10)).toBe(true);
      expect(await direct.finish('k', 'd', { receipt: 1 })).toBe(true);
      const logged: string[] = [];
      const db = drizzle({ client, logger: { logQuery: (query) => logged.push(query) } });
      const logging = new PgIdempotencyStore(db, { schema: target.schema });
      expect(await logging.fetch('k', 0)).toEqual({ receipt: 1 });
      expect(await logging.reserve('k', 'd', 10)).toBe(false);
      expect(logged).toHaveLength(2);
      expect(logged[0]).toMatch(/^select "response" from /);
      expect(logged[1]).toMatch(/^insert into /);
    } finally {
      await client.end();
      await target.drop();
    }
  });
});
