import { fileURLToPath } from 'node:url';
import { sql } from 'drizzle-orm';
import { readMigrationFiles } from 'drizzle-orm/migrator';
import { drizzle } from 'drizzle-orm/mysql2';
import mysql from 'mysql2/promise';
import { afterEach, describe, expect, it } from 'vitest';
import { DatabaseOpenError, InvalidOptionError, SchemaMismatchError } from '../../src/index.js';
import {
  applyMysqlMigrations,
  assertAdoptableMysqlKeysTable,
  mysqlKeysTable,
  openMysqlStore,
} from '../../src/mysql/index.js';
import {
  freshMysqlDatabase,
  type MysqlDatabase,
  mysqlUrl,
  readMysqlRows,
  seedMysqlRows,
} from '../support/mysql.js';

// The library's committed MySQL migrations, as the repository keeps them.
const mysqlMigrationsFolder = fileURLToPath(new URL('../../drizzle/mysql', import.meta.url));

// Collected only when MYSQL_URL is set (see vitest.config.ts); then an unreachable server fails.
const url = mysqlUrl() as string;

// The committed migrations: the keys table, then the fencing token widened to bigint.
const MIGRATIONS = 3;

let target: MysqlDatabase;
afterEach(async () => {
  await target.drop();
});

async function tables(db: MysqlDatabase): Promise<string[]> {
  const [rows] = (await db.pool.query(
    'SELECT TABLE_NAME AS name FROM information_schema.TABLES WHERE TABLE_SCHEMA = ? ORDER BY TABLE_NAME',
    [db.name],
  )) as unknown as [{ name: string }[]];
  return rows.map((row) => row.name).sort();
}

async function attemptType(db: MysqlDatabase): Promise<string | undefined> {
  const [rows] = (await db.pool.query(
    `SELECT DATA_TYPE AS type FROM information_schema.COLUMNS
     WHERE TABLE_SCHEMA = ? AND TABLE_NAME = 'keys' AND COLUMN_NAME = 'attempt'`,
    [db.name],
  )) as unknown as [{ type: string }[]];
  return rows[0]?.type;
}

async function indexes(db: MysqlDatabase, table: string): Promise<string[]> {
  const [rows] = (await db.pool.query(
    `SELECT DISTINCT INDEX_NAME AS name FROM information_schema.STATISTICS
     WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ? ORDER BY INDEX_NAME`,
    [db.name, table],
  )) as unknown as [{ name: string }[]];
  return rows.map((row) => row.name).sort();
}

describe('openMysqlStore and applyMysqlMigrations', () => {
  it('creates the table, its index and the library journal, never drizzle’s', async () => {
    target = await freshMysqlDatabase(url);
    const store = await openMysqlStore(target.url);
    try {
      expect(await store.reserve('k', 'd', 10)).toBe(true);
    } finally {
      await store.close();
    }
    expect(await tables(target)).toEqual(['__idempotency_migrations', 'keys']);
    expect(await indexes(target, 'keys')).toEqual(['PRIMARY', 'keys_status_expires_id_idx']);
    const [journal] = (await target.pool.query(
      'SELECT count(*) AS n FROM __idempotency_migrations',
    )) as unknown as [{ n: number }[]];
    expect(Number(journal[0]?.n)).toBe(MIGRATIONS);
  });

  it('upgrades a database migrated before the fencing-token migration: attempt becomes bigint, tokens kept', async () => {
    target = await freshMysqlDatabase(url);
    // What the release before it left: the first migration run and recorded in our journal.
    const [first] = readMigrationFiles({ migrationsFolder: mysqlMigrationsFolder });
    if (first === undefined) throw new Error('no committed MySQL migration');
    for (const statement of first.sql) await target.pool.query(statement);
    await target.pool.query(
      'CREATE TABLE __idempotency_migrations (id serial PRIMARY KEY, hash text NOT NULL, created_at bigint)',
    );
    await target.pool.query(
      'INSERT INTO __idempotency_migrations (hash, created_at) VALUES (?, ?)',
      [first.hash, first.folderMillis],
    );
    expect(await attemptType(target)).toBe('int');
    await seedMysqlRows(target.db, [
      { id: 'held', fingerprint: 'd', status: 'pending', response: null, expires: 1000 },
    ]);
    await target.pool.query("UPDATE `keys` SET lease_until = 50, attempt = 2 WHERE id = 'held'");
    const store = await openMysqlStore(target.url);
    try {
      expect(await attemptType(target)).toBe('bigint');
      expect(await store.get('held')).toMatchObject({ status: 'pending', fencingToken: 2 });
      const taken = await store.acquire('held', 'd', { expires: 1000, now: 100, leaseSeconds: 30 });
      expect(taken).toMatchObject({ status: 'acquired', takenOver: true });
      const token = taken.status === 'acquired' ? taken.fencingToken : 0;
      expect(token).toBeGreaterThan(2 ** 31);
      expect(await store.finish('held', 'd', { by: 'old' }, 2)).toBe(false);
      expect(await store.finish('held', 'd', { by: 'new' }, token)).toBe(true);
      expect(await store.get('held')).toMatchObject({
        fencingToken: token,
        response: { by: 'new' },
      });
      const fresh = await store.acquire('new', 'd', { expires: 1000, now: 100, leaseSeconds: 30 });
      expect(fresh).toMatchObject({ status: 'acquired', takenOver: false });
      expect((await store.get('new'))?.fencingToken).toBe(
        fresh.status === 'acquired' ? fresh.fencingToken : 0,
      );
    } finally {
      await store.close();
    }
    const [journal] = (await target.pool.query(
      'SELECT count(*) AS n FROM __idempotency_migrations',
    )) as unknown as [{ n: number }[]];
    expect(Number(journal[0]?.n)).toBe(MIGRATIONS);
  });

  it('decides what is pending by each migration, not by the newest recorded', async () => {
    target = await freshMysqlDatabase(url);
    // A journal that records only the last migration: the first, never run, is still pending.
    const files = readMigrationFiles({ migrationsFolder: mysqlMigrationsFolder });
    const last = files[files.length - 1];
    if (last === undefined) throw new Error('no committed MySQL migration');
    await target.pool.query(
      'CREATE TABLE __idempotency_migrations (id serial PRIMARY KEY, hash text NOT NULL, created_at bigint)',
    );
    await target.pool.query(
      'INSERT INTO __idempotency_migrations (hash, created_at) VALUES (?, ?)',
      [last.hash, last.folderMillis],
    );
    await applyMysqlMigrations(target.db);
    expect(await tables(target)).toEqual(['__idempotency_migrations', 'keys']);
    const [journal] = (await target.pool.query(
      'SELECT created_at FROM __idempotency_migrations ORDER BY created_at',
    )) as unknown as [{ created_at: number | string }[]];
    expect(journal.map((row) => Number(row.created_at))).toEqual(
      files.map((file) => file.folderMillis),
    );
  });

  it('is idempotent: a second run keeps the rows and records nothing new', async () => {
    target = await freshMysqlDatabase(url);
    await applyMysqlMigrations(target.db);
    await seedMysqlRows(target.db, [
      { id: 'a', fingerprint: 'f', status: 'done', response: '{"r":1}', expires: 5 },
    ]);
    await applyMysqlMigrations(target.db);
    expect(await readMysqlRows(target.db)).toHaveLength(1);
    const [journal] = (await target.pool.query(
      'SELECT count(*) AS n FROM __idempotency_migrations',
    )) as unknown as [{ n: number }[]];
    expect(Number(journal[0]?.n)).toBe(MIGRATIONS);
  });

  it('serialises 8 instances opening a fresh database at once', async () => {
    target = await freshMysqlDatabase(url, 1);
    const stores = await Promise.all(
      Array.from({ length: 8 }, () => openMysqlStore(target.url, { poolSize: 2 })),
    );
    try {
      const results = await Promise.all(stores.map((store) => store.reserve('race', 'd', 10)));
      expect(results.filter(Boolean)).toHaveLength(1);
    } finally {
      await Promise.all(stores.map((store) => store.close()));
    }
    const [journal] = (await target.pool.query(
      'SELECT count(*) AS n FROM __idempotency_migrations',
    )) as unknown as [{ n: number }[]];
    expect(Number(journal[0]?.n)).toBe(MIGRATIONS);
  });

  it('keeps a renamed table, its index and its journal apart from the default one', async () => {
    target = await freshMysqlDatabase(url);
    const named = await openMysqlStore(target.url, { table: mysqlKeysTable('idem_keys') });
    const plain = await openMysqlStore(target.url);
    try {
      await named.reserve('k', 'named', 10);
      await plain.reserve('k', 'plain', 10);
      expect(await named.finish('k', 'plain', { r: 1 })).toBe(false);
      expect(await named.finish('k', 'named', { r: 2 })).toBe(true);
      expect(await plain.get('k')).toMatchObject({ fingerprint: 'plain', status: 'pending' });
      expect(await named.fetch('k', 0)).toEqual({ r: 2 });
    } finally {
      await named.close();
      await plain.close();
    }
    expect(await tables(target)).toEqual([
      '__idempotency_migrations',
      '__idempotency_migrations_idem_keys',
      'idem_keys',
      'keys',
    ]);
    expect(await indexes(target, 'idem_keys')).toEqual([
      'PRIMARY',
      'idem_keys_status_expires_id_idx',
    ]);
  });

  it('runs whatever the application’s own drizzle journal says', async () => {
    target = await freshMysqlDatabase(url);
    // An application that migrated first, with migrations newer than the library's.
    await target.pool.query(
      'CREATE TABLE __drizzle_migrations (id serial PRIMARY KEY, hash text NOT NULL, created_at bigint)',
    );
    await target.pool.query(
      "INSERT INTO __drizzle_migrations (hash, created_at) VALUES ('app', 99999999999999)",
    );
    await applyMysqlMigrations(target.db);
    expect(await tables(target)).toContain('keys');
    const [rows] = (await target.pool.query(
      'SELECT hash FROM __drizzle_migrations',
    )) as unknown as [{ hash: string }[]];
    expect(rows).toEqual([{ hash: 'app' }]);
  });

  it('adopts a table made by hand with the same columns, keeping its rows', async () => {
    target = await freshMysqlDatabase(url);
    await target.pool.query(
      `CREATE TABLE \`keys\` (id varbinary(1024) NOT NULL PRIMARY KEY, fingerprint varbinary(1024) NOT NULL,
        status varchar(7) NOT NULL, response longtext CHARACTER SET utf8mb4, expires double NOT NULL,
        lease_until double, attempt int NOT NULL DEFAULT 1, unrecorded boolean NOT NULL DEFAULT false)
       ENGINE=InnoDB`,
    );
    await seedMysqlRows(target.db, [
      { id: 'old', fingerprint: 'f', status: 'done', response: '{"r":1}', expires: 5 },
    ]);
    const store = await openMysqlStore(target.url);
    try {
      expect(await store.fetch('old', 0)).toEqual({ r: 1 });
    } finally {
      await store.close();
    }
    expect(await indexes(target, 'keys')).toEqual(['PRIMARY', 'keys_status_expires_id_idx']);
  });

  it.each([
    [
      'an API keys table',
      'CREATE TABLE `keys` (id int PRIMARY KEY, secret text) ENGINE=InnoDB',
      /missing column fingerprint.*unexpected column secret/,
    ],
    [
      'ids compared by collation',
      `CREATE TABLE \`keys\` (id varchar(255) NOT NULL PRIMARY KEY, fingerprint varbinary(1024) NOT NULL,
        status varchar(7) NOT NULL, response longtext, expires double NOT NULL, lease_until double,
        attempt int NOT NULL DEFAULT 1, unrecorded boolean NOT NULL DEFAULT false)`,
      /column id is varchar\(255\), expected varbinary\(1024\)/,
    ],
    [
      'a MyISAM table',
      `CREATE TABLE \`keys\` (id varbinary(255) NOT NULL PRIMARY KEY, fingerprint varbinary(1024) NOT NULL,
        status varchar(7) NOT NULL, response longtext CHARACTER SET utf8mb4, expires double NOT NULL,
        lease_until double, attempt int NOT NULL DEFAULT 1, unrecorded boolean NOT NULL DEFAULT false)
       ENGINE=MyISAM`,
      /engine is MyISAM, expected InnoDB/,
    ],
    [
      'a FLOAT deadline and answers in latin1',
      `CREATE TABLE \`keys\` (id varbinary(1024) NOT NULL PRIMARY KEY, fingerprint varbinary(1024) NOT NULL,
        status varchar(7) NOT NULL, response longtext CHARACTER SET latin1, expires float NOT NULL,
        lease_until double, attempt int NOT NULL DEFAULT 1, unrecorded boolean NOT NULL DEFAULT false)`,
      /column expires is float, expected double.*response is in latin1/,
    ],
  ])('refuses %s and writes nothing', async (_, ddl, message) => {
    target = await freshMysqlDatabase(url);
    await target.pool.query(ddl);
    await expect(assertAdoptableMysqlKeysTable(target.db)).rejects.toThrow(message);
    const error = await openMysqlStore(target.url).catch((caught: unknown) => caught);
    expect(error).toBeInstanceOf(SchemaMismatchError);
    expect(await tables(target)).toEqual(['keys']);
  });

  it('refuses a bad table name, pool size or URL with a typed error', async () => {
    target = await freshMysqlDatabase(url);
    const nowhere = 'mysql://root@127.0.0.1:1/none';
    for (const name of ['', 'a-b', 'x'.repeat(39), '1abc', 'k`s', 'é']) {
      expect(() => mysqlKeysTable(name)).toThrow(InvalidOptionError);
    }
    await expect(openMysqlStore(nowhere, { poolSize: 0 })).rejects.toBeInstanceOf(
      InvalidOptionError,
    );
    await expect(openMysqlStore('')).rejects.toBeInstanceOf(DatabaseOpenError);
    await expect(openMysqlStore(nowhere)).rejects.toBeInstanceOf(DatabaseOpenError);
  });

  it('shares a pool it is given and leaves it open on close', async () => {
    target = await freshMysqlDatabase(url);
    const pool = mysql.createPool({ uri: target.url, connectionLimit: 2 });
    try {
      const store = await openMysqlStore(pool);
      await store.reserve('k', 'd', 1);
      await store.close();
      const rows = await readMysqlRows(drizzle({ client: pool }));
      expect(rows.map((row) => row.id)).toEqual(['k']);
      await expect(store.counts()).rejects.toThrow('closed');
    } finally {
      await pool.end();
    }
  });

  it('runs every connection of its own pool in strict sql_mode', async () => {
    target = await freshMysqlDatabase(url);
    const store = await openMysqlStore(target.url, { poolSize: 3 });
    try {
      const modes = await Promise.all(
        Array.from({ length: 3 }, () => store.db.execute(sql`SELECT @@SESSION.sql_mode AS mode`)),
      );
      for (const [rows] of modes as unknown as [{ mode: string }[]][]) {
        expect(rows[0]?.mode).toMatch(/STRICT_ALL_TABLES/);
      }
    } finally {
      await store.close();
    }
  });
});
