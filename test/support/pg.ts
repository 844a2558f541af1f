import { PGlite } from '@electric-sql/pglite';
import { sql } from 'drizzle-orm';
import { drizzle as drizzleNodePg } from 'drizzle-orm/node-postgres';
import { drizzle as drizzlePglite } from 'drizzle-orm/pglite';
import { drizzle as drizzlePostgresJs } from 'drizzle-orm/postgres-js';
import pg from 'pg';
import postgres from 'postgres';
import { afterAll } from 'vitest';
import { queryRows } from '../../src/pg/client.js';
import { quoteIdentifier } from '../../src/pg/identifier.js';
import {
  type AnyPgDatabase,
  applyPgMigrations,
  PgIdempotencyStore,
  type PgStoreOptions,
  pgKeysTable,
} from '../../src/pg/index.js';
import type { HarnessFactory, RawRow } from '../contract/harness.js';

/**
 * The real server's URL from `DATABASE_URL`, or `undefined` when it is not set. When it is set
 * and the server cannot be reached, the tests using it fail: they never skip.
 */
export function serverUrl(): string | undefined {
  const url = process.env.DATABASE_URL;
  return url === undefined || url === '' ? undefined : url;
}

let counter = 0;

/**
 * A schema or database name that no other test, test file or concurrent test run uses:
 * lower case, so it needs no quoting in psql either.
 */
export function uniqueName(prefix = 't'): string {
  counter += 1;
  const random = Math.random().toString(36).slice(2, 8);
  return `${prefix}_${process.pid}_${counter}_${random}`;
}

/** A fresh, empty schema on the real server, with its own pool. */
export interface ServerSchema {
  readonly url: string;
  readonly schema: string;
  readonly pool: pg.Pool;
  readonly db: AnyPgDatabase;
  /** Drops the schema with everything in it and ends the pool. */
  drop(): Promise<void>;
}

/**
 * Creates an empty schema on the real server (nothing in it: no migrations applied) and a pool of
 * `max` connections. Call `drop()` when done.
 */
export async function freshServerSchema(url: string, max = 4): Promise<ServerSchema> {
  const schema = uniqueName('s');
  const pool = new pg.Pool({ connectionString: url, max });
  await pool.query(`CREATE SCHEMA ${quoteIdentifier(schema)}`);
  return {
    url,
    schema,
    pool,
    db: drizzleNodePg({ client: pool }),
    drop: async () => {
      try {
        await pool.query(`DROP SCHEMA ${quoteIdentifier(schema)} CASCADE`);
      } finally {
        await pool.end();
      }
    },
  };
}

/** A fresh, empty database on the real server, for code that must use the `public` schema. */
export interface ServerDatabase {
  /** The connection string of the new database. */
  readonly url: string;
  /** Drops the database, ending any connection still open to it. */
  drop(): Promise<void>;
}

/** Creates an empty database on the real server next to the one `url` names. */
export async function freshServerDatabase(url: string): Promise<ServerDatabase> {
  const name = uniqueName('d');
  const admin = new pg.Client({ connectionString: url });
  await admin.connect();
  try {
    await admin.query(`CREATE DATABASE ${quoteIdentifier(name)}`);
  } finally {
    await admin.end();
  }
  const target = new URL(url);
  target.pathname = `/${name}`;
  return {
    url: target.toString(),
    drop: () => dropServerDatabase(url, name),
  };
}

/**
 * Drops the database `name` on the server `url` names, once the connections a pool just ended
 * have gone. FORCE would end those mid-close, and their client would get the server's
 * "terminating connection" as an error nobody listens to any more: it waits for them first (a few
 * seconds at most), so FORCE only ends connections left open.
 */
export async function dropServerDatabase(url: string, name: string): Promise<void> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    for (let look = 0; look < 100; look++) {
      const { rows } = await client.query<{ open: number }>(
        'SELECT count(*)::int AS open FROM pg_stat_activity WHERE datname = $1',
        [name],
      );
      if (rows[0]?.open === 0) break;
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    await client.query(`DROP DATABASE IF EXISTS ${quoteIdentifier(name)} WITH (FORCE)`);
  } finally {
    await client.end();
  }
}

/** Every row of `schema.table`, ordered by id (byte order, the column's "C" collation). */
export async function readPgRows(
  db: AnyPgDatabase,
  schema: string,
  table = 'keys',
): Promise<RawRow[]> {
  return queryRows<RawRow>(
    db,
    sql.raw(
      `SELECT id, fingerprint, status, response, expires FROM ${quoteIdentifier(schema)}.${quoteIdentifier(table)} ORDER BY id`,
    ),
  );
}

/** Inserts rows into `schema.table` directly, bypassing the store. */
export async function seedPgRows(
  db: AnyPgDatabase,
  schema: string,
  rows: RawRow[],
  table = 'keys',
): Promise<void> {
  if (rows.length === 0) return;
  const values = sql.join(
    rows.map(
      (row) =>
        sql`(${row.id}, ${row.fingerprint}, ${row.status}, ${row.response}, ${row.expires}::float8)`,
    ),
    sql`, `,
  );
  await db.execute(
    sql`INSERT INTO ${sql.raw(`${quoteIdentifier(schema)}.${quoteIdentifier(table)}`)} (id, fingerprint, status, response, expires) VALUES ${values}`,
  );
}

// One schema per test file on one connection source shared by the file, emptied before each test:
// a PGlite instance takes seconds to create, and creating and migrating a schema per test would
// cost more than the test itself. Test files run in parallel, each in its own schema. DELETE
// rather than TRUNCATE: on a few rows it is many times cheaper.
function schemaHarness(
  shared: () => Promise<AnyPgDatabase>,
  name = 'keys',
  storeOptions: PgStoreOptions = {},
): HarnessFactory {
  const schema = uniqueName('c');
  const table = pgKeysTable(name, { schema });
  const migrated = once(
    async () => {
      const db = await shared();
      await applyPgMigrations(db, { table });
      return db;
    },
    async (db) => {
      await db.execute(sql.raw(`DROP SCHEMA ${quoteIdentifier(schema)} CASCADE`));
    },
  );
  return async () => {
    const db = await migrated();
    await db.execute(sql.raw(`DELETE FROM ${quoteIdentifier(schema)}.${quoteIdentifier(name)}`));
    const store = new PgIdempotencyStore(db, { table, ...storeOptions });
    return {
      store,
      rows: () => readPgRows(db, schema, name),
      seed: (rows) => seedPgRows(db, schema, rows, name),
      close: () => store.close(),
    };
  };
}

function once<R>(make: () => Promise<R>, dispose: (value: R) => Promise<void>): () => Promise<R> {
  let value: Promise<R> | undefined;
  afterAll(async () => {
    if (value) await dispose(await value);
  });
  return () => {
    value ??= make();
    return value;
  };
}

/**
 * One in-process PGlite database for the whole test file, created on first use (it takes seconds)
 * and closed when the file ends. Give each test its own schema.
 */
export function sharedPglite(): () => Promise<AnyPgDatabase> {
  const client = once(
    async () => new PGlite(),
    (pglite) => pglite.close(),
  );
  return async () => drizzlePglite({ client: await client() });
}

/**
 * A harness over one in-process PGlite database per test file, on the keys table `table` (a
 * renamed table exercises the derived names and the rewritten migrations).
 */
export function pgliteHarness(table = 'keys', storeOptions: PgStoreOptions = {}): HarnessFactory {
  return schemaHarness(sharedPglite(), table, storeOptions);
}

/**
 * A harness over a database the caller keeps (e.g. one reached through a pooler), with the
 * store's `prepare` option; one schema per test file, as the other harnesses.
 */
export function pgHarnessOver(
  shared: () => Promise<AnyPgDatabase>,
  storeOptions: { readonly prepare?: boolean; readonly batch?: boolean },
): HarnessFactory {
  return schemaHarness(shared, 'keys', storeOptions);
}

/** A harness over the real server at `url` through node-postgres, with one pool per test file. */
export function serverHarness(
  url: string,
  table = 'keys',
  storeOptions: PgStoreOptions = {},
): HarnessFactory {
  const pool = once(
    async () => new pg.Pool({ connectionString: url, max: 4 }),
    (value) => value.end(),
  );
  return schemaHarness(async () => drizzleNodePg({ client: await pool() }), table, storeOptions);
}

/** A harness over the real server at `url` through postgres-js, one client per test file. */
export function postgresJsHarness(
  url: string,
  table = 'keys',
  storeOptions: PgStoreOptions = {},
): HarnessFactory {
  const client = once(
    async () => postgres(url, { max: 4, onnotice: () => undefined }),
    (value) => value.end(),
  );
  return schemaHarness(
    async () => drizzlePostgresJs({ client: await client() }),
    table,
    storeOptions,
  );
}
