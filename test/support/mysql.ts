import { sql } from 'drizzle-orm';
import { getTableConfig } from 'drizzle-orm/mysql-core';
import { drizzle } from 'drizzle-orm/mysql2';
import mysql from 'mysql2/promise';
import { afterAll } from 'vitest';
import type { Keyring } from '../../src/index.js';
import {
  type AnyMysqlDatabase,
  applyMysqlMigrations,
  keys,
  MysqlIdempotencyStore,
  type MysqlKeysTable,
} from '../../src/mysql/index.js';
import type { HarnessFactory, RawRow } from '../contract/harness.js';
import { uniqueName } from './pg.js';

/**
 * The MySQL or MariaDB server's URL from `MYSQL_URL`, or `undefined` when it is not set. When it
 * is set and the server cannot be reached, the tests using it fail: they never skip.
 */
export function mysqlUrl(): string | undefined {
  const url = process.env.MYSQL_URL;
  return url === undefined || url === '' ? undefined : url;
}

/** A fresh, empty database on the server, with its own pool. */
export interface MysqlDatabase {
  /** The connection string of the new database. */
  readonly url: string;
  readonly name: string;
  readonly pool: mysql.Pool;
  readonly db: AnyMysqlDatabase;
  /** Drops the database and ends the pool. */
  drop(): Promise<void>;
}

/**
 * Creates an empty database next to the one `url` names (nothing in it: no migrations applied)
 * and a pool of `connectionLimit` connections to it. Call `drop()` when done.
 */
export async function freshMysqlDatabase(url: string, connectionLimit = 4): Promise<MysqlDatabase> {
  const name = uniqueName('m');
  const admin = await mysql.createConnection(url);
  try {
    await admin.query(`CREATE DATABASE \`${name}\``);
  } finally {
    await admin.end();
  }
  const target = new URL(url);
  target.pathname = `/${name}`;
  const pool = mysql.createPool({ uri: target.toString(), connectionLimit });
  return {
    url: target.toString(),
    name,
    pool,
    db: drizzle({ client: pool }),
    drop: async () => {
      try {
        await pool.query(`DROP DATABASE \`${name}\``);
      } finally {
        await pool.end();
      }
    },
  };
}

/** Every row of `table`, ordered by id (byte order: the column is VARBINARY). */
export async function readMysqlRows(db: AnyMysqlDatabase, table = 'keys'): Promise<RawRow[]> {
  const [rows] = (await db.execute(
    sql`SELECT id, fingerprint, status, response, expires FROM ${sql.identifier(table)} ORDER BY id`,
  )) as unknown as [
    { id: Buffer; fingerprint: Buffer; status: string; response: string | null; expires: number }[],
  ];
  return rows.map((row) => ({
    id: row.id.toString('utf8'),
    fingerprint: row.fingerprint.toString('utf8'),
    status: row.status,
    response: row.response,
    expires: row.expires,
  }));
}

/** Inserts rows into `table` directly, bypassing the store. */
export async function seedMysqlRows(
  db: AnyMysqlDatabase,
  rows: RawRow[],
  table = 'keys',
): Promise<void> {
  if (rows.length === 0) return;
  const values = sql.join(
    rows.map(
      (row) => sql`(${row.id}, ${row.fingerprint}, ${row.status}, ${row.response}, ${row.expires})`,
    ),
    sql`, `,
  );
  await db.execute(
    sql`INSERT INTO ${sql.identifier(table)} (id, fingerprint, status, response, expires) VALUES ${values}`,
  );
}

/**
 * A harness over the server at `url`: one migrated database per test file, emptied before each
 * test and dropped when the file ends (creating and migrating one per test would cost more than
 * the test itself). With `viaDrizzle`, the store's database has a logger, which makes the store
 * run every statement through drizzle instead of sending its hot ones to mysql2 directly; with
 * `vitess`, the store sends what Vitess accepts (see `MysqlStoreOptions.vitess`); with `batch`,
 * the store batches concurrent calls (see `MysqlStoreOptions.batch`).
 */
export function mysqlHarness(
  url: string,
  options: {
    readonly viaDrizzle?: boolean;
    readonly table?: MysqlKeysTable;
    readonly vitess?: boolean;
    readonly batch?: boolean;
    readonly encryption?: Keyring;
  } = {},
): HarnessFactory {
  const table = options.table ?? keys;
  const name = getTableConfig(table).name;
  let database: Promise<MysqlDatabase> | undefined;
  afterAll(async () => {
    if (database) await (await database).drop();
  });
  return async () => {
    database ??= freshMysqlDatabase(url).then(async (fresh) => {
      await applyMysqlMigrations(fresh.db, { table });
      return fresh;
    });
    const { db, pool } = await database;
    await db.execute(sql`DELETE FROM ${sql.identifier(name)}`);
    const store = new MysqlIdempotencyStore(
      options.viaDrizzle ? drizzle({ client: pool, logger: { logQuery: () => undefined } }) : db,
      { table, vitess: options.vitess, batch: options.batch, encryption: options.encryption },
    );
    return {
      store,
      rows: () => readMysqlRows(db, name),
      seed: (rows) => seedMysqlRows(db, rows, name),
      close: () => store.close(),
    };
  };
}
