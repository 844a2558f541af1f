import { Client } from '@planetscale/database';
import { sql } from 'drizzle-orm';
import { getTableConfig } from 'drizzle-orm/mysql-core';
import { drizzle as drizzleMysql2 } from 'drizzle-orm/mysql2';
import { drizzle } from 'drizzle-orm/planetscale-serverless';
import mysql from 'mysql2/promise';
import { afterAll } from 'vitest';
import type { Keyring } from '../../src/index.js';
import {
  type AnyPlanetscaleDatabase,
  applyPlanetscaleMigrations,
  keys,
  type MysqlKeysTable,
  PlanetscaleIdempotencyStore,
} from '../../src/mysql/index.js';
import type { HarnessFactory } from '../contract/harness.js';
import { readMysqlRows, seedMysqlRows } from './mysql.js';
import { uniqueName } from './pg.js';
import { type PlanetscaleEndpoint, startPlanetscaleEndpoint } from './planetscale-endpoint.js';

/** A fresh database on the server, reached by mysql2 directly and by the driver through the endpoint. */
export interface Served {
  readonly name: string;
  readonly direct: mysql.Pool;
  readonly endpoint: PlanetscaleEndpoint;
  readonly db: AnyPlanetscaleDatabase;
  readonly client: Client;
  drop(): Promise<void>;
}

export async function served(url: string): Promise<Served> {
  const name = uniqueName('serverless_ps');
  const admin = await mysql.createConnection(url);
  try {
    await admin.query(`CREATE DATABASE \`${name}\``);
  } finally {
    await admin.end();
  }
  const target = new URL(url);
  target.pathname = `/${name}`;
  const direct = mysql.createPool({ uri: target.toString(), connectionLimit: 2 });
  const endpoint = await startPlanetscaleEndpoint(target.toString());
  const client = new Client({ url: endpoint.url });
  return {
    name,
    direct,
    endpoint,
    client,
    db: drizzle({ client }),
    drop: async () => {
      await endpoint.close();
      try {
        await direct.query(`DROP DATABASE \`${name}\``);
      } finally {
        await direct.end();
      }
    },
  };
}

/**
 * A harness over the PlanetScale driver, answered by an endpoint over the MySQL server at `url`:
 * one migrated database per test file, emptied before each test.
 */
export function planetscaleHarness(
  url: string,
  table: MysqlKeysTable = keys,
  encryption?: Keyring,
): HarnessFactory {
  const name = getTableConfig(table).name;
  let database: Promise<Served> | undefined;
  afterAll(async () => {
    if (database) await (await database).drop();
  });
  return async () => {
    database ??= served(url).then(async (fresh) => {
      await applyPlanetscaleMigrations(fresh.db, { table });
      return fresh;
    });
    const { db, direct } = await database;
    const rows = drizzleMysql2({ client: direct });
    await rows.execute(sql`DELETE FROM ${sql.identifier(name)}`);
    const store = new PlanetscaleIdempotencyStore(db, { table, encryption });
    return {
      store,
      rows: () => readMysqlRows(rows, name),
      seed: (seeded) => seedMysqlRows(rows, seeded, name),
      close: () => store.close(),
    };
  };
}
