// The option and function names that are the same on every dialect, and the former names that
// still work beside them until 1.0.
import { createClient } from '@libsql/client';
import Database from 'better-sqlite3';
import { getTableName } from 'drizzle-orm';
import { drizzle } from 'drizzle-orm/better-sqlite3';
import { drizzle as libsqlDrizzle } from 'drizzle-orm/libsql';
import { getTableConfig } from 'drizzle-orm/pg-core';
import { describe, expect, it } from 'vitest';
import { InvalidOptionError } from '../../src/index.js';
import {
  applyLibsqlMigrations,
  assertAdoptableLibsqlKeysTable,
  assertAdoptableLibsqlTables,
  LibsqlIdempotencyStore,
} from '../../src/libsql/index.js';
import { openMysqlStore } from '../../src/mysql/index.js';
import { openPgStore, pgKeysTable, pgPushTables } from '../../src/pg/index.js';
import {
  applySqliteMigrations,
  assertAdoptableKeysTable,
  assertAdoptableSqliteKeysTable,
  SqliteIdempotencyStore,
} from '../../src/sqlite/index.js';

function sqliteDb() {
  const db = drizzle({ client: new Database(':memory:') });
  applySqliteMigrations(db);
  return db;
}

describe('the close option: onClose on every store', () => {
  it('SQLite: onClose runs once, on the first close, and the connection stays open without it', () => {
    const db = sqliteDb();
    let calls = 0;
    const store = new SqliteIdempotencyStore(db, { onClose: () => calls++ });
    store.close();
    store.close();
    expect(calls).toBe(1);
    expect(db.$client.open).toBe(true);
    new SqliteIdempotencyStore(db).close();
    expect(db.$client.open).toBe(true);
    db.$client.close();
  });

  it('SQLite: the deprecated closeConnection: true still closes the connection', () => {
    const db = sqliteDb();
    new SqliteIdempotencyStore(db, { closeConnection: true }).close();
    expect(db.$client.open).toBe(false);
  });

  it('libSQL: onClose runs once; the deprecated closeConnection: true closes the client', async () => {
    const client = createClient({ url: ':memory:' });
    const db = libsqlDrizzle({ client });
    await applyLibsqlMigrations(db);
    let calls = 0;
    const store = new LibsqlIdempotencyStore(db, { onClose: () => calls++ });
    await store.close();
    await store.close();
    expect(calls).toBe(1);
    expect(client.closed).toBe(false);
    await new LibsqlIdempotencyStore(db, { closeConnection: true }).close();
    expect(client.closed).toBe(true);
  });
});

describe('the pool-size option: poolSize on every open*Store', () => {
  // An address nothing listens on: a refused size is refused before any connection is tried.
  const nowhere = { pg: 'postgres://127.0.0.1:1/none', mysql: 'mysql://root@127.0.0.1:1/none' };

  it.each([
    { name: 'poolSize', options: { poolSize: 0 } },
    { name: 'max', options: { max: 0 } },
  ])(
    'openPgStore refuses $name 0 with InvalidOptionError, naming it',
    async ({ name, options }) => {
      const opening = openPgStore(nowhere.pg, options);
      await expect(opening).rejects.toBeInstanceOf(InvalidOptionError);
      await expect(opening).rejects.toThrow(name);
    },
  );

  it.each([
    { name: 'poolSize', options: { poolSize: 0 } },
    { name: 'connectionLimit', options: { connectionLimit: 0 } },
  ])(
    'openMysqlStore refuses $name 0 with InvalidOptionError, naming it',
    async ({ name, options }) => {
      const opening = openMysqlStore(nowhere.mysql, options);
      await expect(opening).rejects.toBeInstanceOf(InvalidOptionError);
      await expect(opening).rejects.toThrow(name);
    },
  );
});

describe('the adoption check: assertAdoptable<Dialect>KeysTable', () => {
  it('keeps the former SQLite and libSQL names as the same functions', () => {
    expect(assertAdoptableKeysTable).toBe(assertAdoptableSqliteKeysTable);
    expect(assertAdoptableLibsqlTables).toBe(assertAdoptableLibsqlKeysTable);
  });
});

describe('pgKeysTable(name, { schema }), as sqliteKeysTable(name) and mysqlKeysTable(name)', () => {
  const place = (table: ReturnType<typeof pgKeysTable>) => {
    const config = getTableConfig(table);
    return { name: config.name, schema: config.schema ?? 'public' };
  };

  it('takes the name first, the schema in options, and keeps the deprecated object form', () => {
    expect(place(pgKeysTable())).toEqual({ name: 'keys', schema: 'public' });
    expect(place(pgKeysTable('idem'))).toEqual({ name: 'idem', schema: 'public' });
    expect(place(pgKeysTable('idem', { schema: 'billing' }))).toEqual({
      name: 'idem',
      schema: 'billing',
    });
    expect(place(pgKeysTable({ name: 'idem', schema: 'billing' }))).toEqual({
      name: 'idem',
      schema: 'billing',
    });
    expect(place(pgKeysTable({ schema: 'billing' }))).toEqual({ name: 'keys', schema: 'billing' });
  });

  it('pgPushTables takes the same arguments', () => {
    expect(getTableName(pgPushTables('idem', { schema: 'billing' }).keys)).toBe('idem');
    expect(getTableConfig(pgPushTables({ name: 'idem', schema: 'billing' }).keys).schema).toBe(
      'billing',
    );
  });

  it.each([
    [42, {}],
    [null, {}],
    ['idem', null],
    ['idem', 'billing'],
  ])('refuses pgKeysTable(%j, %j) with InvalidOptionError', (name, options) => {
    const call = () => pgKeysTable(name as string, options as { schema: string });
    expect(call).toThrow(InvalidOptionError);
    expect(() => pgPushTables(name as string, options as { schema: string })).toThrow(
      InvalidOptionError,
    );
  });
});
