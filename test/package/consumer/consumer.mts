// A strict application using every entry point of the installed package, typechecked with
// skipLibCheck: false by test/package/consumer-types.test.ts under whichever drizzle-orm is
// installed: each database is made as a user makes it, `drizzle({ client })`, and handed to the
// store without a cast.
import { PGlite } from '@electric-sql/pglite';
import { createClient } from '@libsql/client';
import { Pool as NeonPool, neon } from '@neondatabase/serverless';
import { Client as PlanetscaleClient } from '@planetscale/database';
import Database from 'better-sqlite3';
import {
  type IdempotencyStore,
  KeyStatus,
  sweep,
  UnrecognisedDatabaseError,
} from 'drizzle-idempotency';
import type {
  BunSqliteHandlerTransaction,
  OpenBunSqliteStoreOptions,
} from 'drizzle-idempotency/bun-sqlite';
import {
  applyBunSqliteMigrations,
  bunSqliteSteps,
  openBunSqliteStore,
} from 'drizzle-idempotency/bun-sqlite';
import {
  applyD1Migrations,
  D1IdempotencyStore,
  d1Steps,
  d1Transaction,
} from 'drizzle-idempotency/d1';
import {
  applyDurableSqliteMigrations,
  type DurableSqliteHandlerTransaction,
  DurableSqliteIdempotencyStore,
  durableSqliteSteps,
  durableSqliteTransaction,
} from 'drizzle-idempotency/durable-sqlite';
import { expressIdempotency, expressTransaction } from 'drizzle-idempotency/express';
import { fastifyIdempotency } from 'drizzle-idempotency/fastify';
import { fetchIdempotency, fetchTransaction } from 'drizzle-idempotency/fetch';
import { makeIdempotent } from 'drizzle-idempotency/function';
import { honoIdempotency } from 'drizzle-idempotency/hono';
import { idempotent } from 'drizzle-idempotency/http';
import {
  applyLibsqlMigrations,
  type LibsqlHandlerTransaction,
  LibsqlIdempotencyStore,
  libsqlSteps,
  libsqlTransaction,
  openLibsqlStore,
} from 'drizzle-idempotency/libsql';
import {
  applyMysqlMigrations,
  applyPlanetscaleMigrations,
  type MysqlHandlerTransaction,
  MysqlIdempotencyStore,
  type MysqlKeysTable,
  mysqlKeysTable,
  mysqlSteps,
  mysqlTransaction,
  openMysqlStore,
  type PlanetscaleHandlerTransaction,
  PlanetscaleIdempotencyStore,
  planetscaleTransaction,
} from 'drizzle-idempotency/mysql';
import { IdempotencyModule } from 'drizzle-idempotency/nestjs';
import { instrumentStore } from 'drizzle-idempotency/observe';
import {
  applyNeonHttpMigrations,
  applyPgMigrations,
  neonHttpTransaction,
  openPgStore,
  type PgHandlerTransaction,
  PgIdempotencyStore,
  type PgKeysTable,
  pgKeysTable,
  pgPushTables,
  pgSteps,
  pgTransaction,
} from 'drizzle-idempotency/pg';
import { initDb } from 'drizzle-idempotency/service';
import {
  applySqliteMigrations,
  keys,
  openSqliteStore,
  type SqliteHandlerTransaction,
  SqliteIdempotencyStore,
  type SqliteKeysTable,
  sqliteKeysTable,
  sqlitePushTables,
  sqliteSteps,
  sqliteTransaction,
} from 'drizzle-idempotency/sqlite';
import { reserve } from 'drizzle-idempotency/sqlite-file';
import { drizzle as betterSqliteDrizzle } from 'drizzle-orm/better-sqlite3';
import { drizzle as d1Drizzle } from 'drizzle-orm/d1';
import { drizzle as durableDrizzle } from 'drizzle-orm/durable-sqlite';
import { drizzle as libsqlDrizzle } from 'drizzle-orm/libsql';
import { drizzle as mysqlDrizzle } from 'drizzle-orm/mysql2';
import { drizzle as neonHttpDrizzle } from 'drizzle-orm/neon-http';
import { drizzle as neonServerlessDrizzle } from 'drizzle-orm/neon-serverless';
import { drizzle as nodePgDrizzle } from 'drizzle-orm/node-postgres';
import { drizzle as pgliteDrizzle } from 'drizzle-orm/pglite';
import { drizzle as planetscaleDrizzle } from 'drizzle-orm/planetscale-serverless';
import { drizzle as postgresJsDrizzle } from 'drizzle-orm/postgres-js';
import mysql from 'mysql2/promise';
import pg from 'pg';
import postgres from 'postgres';

interface Receipt {
  receipt: number;
}

/** The schema an application would hand to drizzle-kit, with the library's tables in it. */
export const schema = {
  keys,
  renamedSqlite: sqliteKeysTable('idem_keys'),
  renamedPg: pgKeysTable('idem_keys'),
  renamedMysql: mysqlKeysTable('idem_keys'),
  sqlitePush: sqlitePushTables('idem_push').journal,
  pgPush: pgPushTables('idem_push', { schema: 'idem' }).journal,
};

// The tables' rows are typed, not `any`: a status is a KeyStatus, a lease deadline may be null.
type SqliteRow = SqliteKeysTable['$inferSelect'];
type PgRow = PgKeysTable['$inferSelect'];
type MysqlRow = MysqlKeysTable['$inferSelect'];
export const statuses = (sqliteRow: SqliteRow, pgRow: PgRow, mysqlRow: MysqlRow): KeyStatus[] => [
  sqliteRow.status,
  pgRow.status,
  mysqlRow.status,
];
export const leases = (row: SqliteRow): number | null => row.leaseUntil;
// @ts-expect-error a key's status is a KeyStatus, never any string
export const badStatus: PgRow['status'] = 'finished';
export const newRow: MysqlKeysTable['$inferInsert'] = {
  id: 'k',
  fingerprint: 'f',
  status: KeyStatus.pending,
  expires: 0,
};
const steps = { secret: 'a secret of thirty-two characters!!' };

const sqlite = betterSqliteDrizzle({ client: new Database('consumer.db') });
applySqliteMigrations(sqlite);
export const sqliteStore: IdempotencyStore<Receipt> = new SqliteIdempotencyStore<Receipt>(sqlite);
export const openedSqlite = openSqliteStore<Receipt>('consumer.db');
export const inSqlite = sqliteTransaction(new SqliteIdempotencyStore(sqlite));
export const sqliteStepLog = sqliteSteps(new SqliteIdempotencyStore(sqlite), steps);
export const sqliteInsert = (tx: SqliteHandlerTransaction) =>
  tx
    .insert(keys)
    .values({ id: 'k', fingerprint: 'f', status: KeyStatus.pending, expires: 0 })
    .run();

const libsql = libsqlDrizzle({ client: createClient({ url: 'file:consumer-libsql.db' }) });
await applyLibsqlMigrations(libsql);
export const libsqlStore = new LibsqlIdempotencyStore<Receipt>(libsql);
export const inLibsql = libsqlTransaction(libsqlStore);
export const openedLibsql = await openLibsqlStore<Receipt>('file:consumer-libsql.db');
export const libsqlStepLog = libsqlSteps(libsqlStore, steps);
export const libsqlRows = async (tx: LibsqlHandlerTransaction): Promise<SqliteRow[]> =>
  tx.select().from(keys).all();

const pool = new pg.Pool({ connectionString: 'postgres://localhost/app' });
const nodePg = nodePgDrizzle({ client: pool });
await applyPgMigrations(nodePg);
export const nodePgStore = new PgIdempotencyStore<Receipt>(nodePg, { schema: 'idem' });
export const inNodePg = pgTransaction(nodePgStore);
export const openedPg = await openPgStore<Receipt>(pool);
export const pgStepLog = pgSteps(nodePgStore, steps);
export const pgRows = async (tx: PgHandlerTransaction): Promise<PgRow[]> =>
  tx.select().from(schema.renamedPg);
export const postgresJsStore = new PgIdempotencyStore(
  postgresJsDrizzle({ client: postgres('postgres://localhost/app') }),
);
export const pgliteStore = new PgIdempotencyStore(pgliteDrizzle({ client: new PGlite() }));
export const neonPoolStore = new PgIdempotencyStore(
  neonServerlessDrizzle({ client: new NeonPool({ connectionString: 'postgres://localhost/app' }) }),
);
const neonHttp = neonHttpDrizzle({ client: neon('postgres://localhost/app') });
await applyNeonHttpMigrations(neonHttp);
export const inNeonHttp = neonHttpTransaction(new PgIdempotencyStore(neonHttp));

const mysqlPool = mysql.createPool('mysql://localhost/app');
const mysqlDb = mysqlDrizzle({ client: mysqlPool });
await applyMysqlMigrations(mysqlDb);
export const mysqlStore = new MysqlIdempotencyStore<Receipt>(mysqlDb);
export const inMysql = mysqlTransaction(mysqlStore);
export const openedMysql = await openMysqlStore<Receipt>(mysqlPool);
export const mysqlStepLog = mysqlSteps(mysqlStore, steps);
export const mysqlRows = async (tx: MysqlHandlerTransaction): Promise<MysqlRow[]> =>
  tx.select().from(schema.renamedMysql);
const planetscale = planetscaleDrizzle({
  client: new PlanetscaleClient({ url: 'mysql://localhost/app' }),
});
await applyPlanetscaleMigrations(planetscale);
export const inPlanetscale = planetscaleTransaction(new PlanetscaleIdempotencyStore(planetscale));
export const planetscaleInsert = async (tx: PlanetscaleHandlerTransaction) =>
  tx.insert(schema.renamedMysql).values(newRow);

declare const env: { DB: Parameters<typeof d1Drizzle>[0] };
const d1 = d1Drizzle(env.DB);
await applyD1Migrations(d1);
const d1Store = new D1IdempotencyStore<Receipt>(d1);
export const inD1 = d1Transaction(d1Store);
export const d1StepLog = d1Steps(d1Store, steps);

declare const storage: Parameters<typeof durableDrizzle>[0];
const durable = durableDrizzle(storage);
applyDurableSqliteMigrations(durable);
const durableStore = new DurableSqliteIdempotencyStore(durable);
export const inDurable = durableSqliteTransaction(durableStore);
export const durableStepLog = durableSqliteSteps(durableStore, steps);
export const durableInsert = (tx: DurableSqliteHandlerTransaction) =>
  tx.insert(keys).values({ id: 'k', fingerprint: 'f', status: KeyStatus.pending, expires: 0 });

export const bunOptions: OpenBunSqliteStoreOptions = {};
export const bun = [applyBunSqliteMigrations, openBunSqliteStore, bunSqliteSteps] as const;
export const bunInsert = (tx: BunSqliteHandlerTransaction) =>
  tx.insert(keys).values({ id: 'k', fingerprint: 'f', status: KeyStatus.pending, expires: 0 });

export const express = [
  expressIdempotency(openedSqlite, { scope: 'global', ttlSeconds: 60 }),
  expressTransaction(
    inSqlite,
    (_request, tx) => {
      tx.insert(keys)
        .values({ id: 'k', fingerprint: 'f', status: KeyStatus.pending, expires: 0 })
        .run();
      return { status: 201, body: { ok: true } };
    },
    { scope: 'global' },
  ),
];
export const fastify = fastifyIdempotency(libsqlStore, { scope: 'global' });
export const hono = honoIdempotency(nodePgStore, { scope: 'global' });
export const fetchHandler = fetchIdempotency(mysqlStore, { scope: 'global' });
export const fetchTx = fetchTransaction(
  inNodePg,
  async (_request, tx) => {
    const rows = await tx.select().from(schema.renamedPg);
    return { status: 200, body: { rows: rows.length } };
  },
  { scope: 'global' },
);
export const executor = idempotent(pgliteStore, { ttlSeconds: 60 });
export const nest = IdempotencyModule.forRoot({ store: postgresJsStore, scope: 'global' });
export const charge = makeIdempotent(async (amount: number) => ({ amount }), {
  store: neonPoolStore,
  key: (amount) => String(amount),
});
export const observed = instrumentStore(sqliteStore, { dialect: 'sqlite' });
export const service = initDb;
export const file = reserve;
export const swept = sweep(openedSqlite, { now: 0 });
export const pending = KeyStatus.pending;
export const refused = (error: unknown) => error instanceof UnrecognisedDatabaseError;

// The stores' types are their own drivers': a PostgreSQL database is no SQLite store's.
// @ts-expect-error the SQLite store takes a better-sqlite3 database only
export const misused = new SqliteIdempotencyStore(pgliteDrizzle({ client: new PGlite() }));
