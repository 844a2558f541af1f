// The option and function names that are the same on every dialect; the former names are gone.
import { createClient } from '@libsql/client';
import Database from 'better-sqlite3';
import { getTableName } from 'drizzle-orm';
import { drizzle } from 'drizzle-orm/better-sqlite3';
import { drizzle as libsqlDrizzle } from 'drizzle-orm/libsql';
import { getTableConfig } from 'drizzle-orm/pg-core';
import { describe, expect, it } from 'vitest';
import { InvalidOptionError } from '../../src/index.js';
import * as libsqlEntry from '../../src/libsql/index.js';
import { applyLibsqlMigrations, LibsqlIdempotencyStore } from '../../src/libsql/index.js';
import { openMysqlStore } from '../../src/mysql/index.js';
import { openPgStore, pgKeysTable, pgPushTables } from '../../src/pg/index.js';
import * as formerFileEntry from '../../src/service.js';
import * as sqliteEntry from '../../src/sqlite/index.js';
import { applySqliteMigrations, SqliteIdempotencyStore } from '../../src/sqlite/index.js';
import * as fileEntry from '../../src/sqlite-file.js';

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

  it('libSQL: onClose runs once, and the client stays open without it', async () => {
    const client = createClient({ url: ':memory:' });
    const db = libsqlDrizzle({ client });
    await applyLibsqlMigrations(db);
    let calls = 0;
    const store = new LibsqlIdempotencyStore(db, { onClose: () => calls++ });
    await store.close();
    await store.close();
    expect(calls).toBe(1);
    expect(client.closed).toBe(false);
    await new LibsqlIdempotencyStore(db).close();
    expect(client.closed).toBe(false);
    client.close();
  });
});

describe('the pool-size option: poolSize on every open*Store', () => {
  // An address nothing listens on: a refused size is refused before any connection is tried.
  const nowhere = { pg: 'postgres://127.0.0.1:1/none', mysql: 'mysql://root@127.0.0.1:1/none' };

  it('openPgStore refuses poolSize 0 with InvalidOptionError, naming it', async () => {
    const opening = openPgStore(nowhere.pg, { poolSize: 0 });
    await expect(opening).rejects.toBeInstanceOf(InvalidOptionError);
    await expect(opening).rejects.toThrow('poolSize');
  });

  it('openMysqlStore refuses poolSize 0 with InvalidOptionError, naming it', async () => {
    const opening = openMysqlStore(nowhere.mysql, { poolSize: 0 });
    await expect(opening).rejects.toBeInstanceOf(InvalidOptionError);
    await expect(opening).rejects.toThrow('poolSize');
  });
});

describe('the adoption check: assertAdoptable<Dialect>KeysTable', () => {
  it('exports the SQLite and libSQL checks under that name only', () => {
    expect(typeof sqliteEntry.assertAdoptableSqliteKeysTable).toBe('function');
    expect(typeof libsqlEntry.assertAdoptableLibsqlKeysTable).toBe('function');
    expect(Object.keys(sqliteEntry)).not.toContain('assertAdoptableKeysTable');
    expect(Object.keys(libsqlEntry)).not.toContain('assertAdoptableLibsqlTables');
  });
});

describe('pgKeysTable(name, { schema }), as sqliteKeysTable(name) and mysqlKeysTable(name)', () => {
  const place = (table: ReturnType<typeof pgKeysTable>) => {
    const config = getTableConfig(table);
    return { name: config.name, schema: config.schema ?? 'public' };
  };

  it('takes the name first and the schema in options', () => {
    expect(place(pgKeysTable())).toEqual({ name: 'keys', schema: 'public' });
    expect(place(pgKeysTable('idem'))).toEqual({ name: 'idem', schema: 'public' });
    expect(place(pgKeysTable('idem', { schema: 'billing' }))).toEqual({
      name: 'idem',
      schema: 'billing',
    });
  });

  it('pgPushTables takes the same arguments', () => {
    const { keys } = pgPushTables('idem', { schema: 'billing' });
    expect(getTableName(keys)).toBe('idem');
    expect(getTableConfig(keys).schema).toBe('billing');
  });

  it.each([
    [42, {}],
    [null, {}],
    // The object form of 0.1.0, removed.
    [{ name: 'idem', schema: 'billing' }, {}],
    [{ schema: 'billing' }, undefined],
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

describe('the one-shot SQLite file functions: drizzle-idempotency/sqlite-file', () => {
  it('keeps the former ./service subpath as an alias of the same functions', () => {
    expect(Object.entries(formerFileEntry).sort()).toEqual(Object.entries(fileEntry).sort());
    expect(formerFileEntry.reserve).toBe(fileEntry.reserve);
  });
});
