import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { sql } from 'drizzle-orm';
import { drizzle } from 'drizzle-orm/better-sqlite3';
import { integer, sqliteTable, text } from 'drizzle-orm/sqlite-core';
import { describe, expect, it } from 'vitest';
import { DatabaseOpenError, InvalidOptionError, SchemaMismatchError } from '../../src/index.js';
import {
  applySqliteMigrations,
  openSqliteStore,
  SqliteIdempotencyStore,
} from '../../src/sqlite/index.js';
import { fixture, runTs } from '../support/child.js';
import { readRows } from '../support/sqlite-harness.js';
import { freshDbPath, tempDir } from '../support/temp.js';

const dir = tempDir();

// What the library's migrations leave: its four migrations recorded, the retention index and
// the partial index of done rows in id order.
const MIGRATED = {
  migrations: 4,
  indexes: ['keys_status_expires_id_idx', 'keys_done_id_expires_idx'],
};

function inspect(path: string) {
  const client = new Database(path, { readonly: true });
  try {
    return {
      migrations: (
        client.prepare('SELECT count(*) AS n FROM __idempotency_migrations').get() as { n: number }
      ).n,
      indexes: (
        client
          .prepare(
            "SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'keys' AND sql IS NOT NULL",
          )
          .all() as { name: string }[]
      ).map((row) => row.name),
    };
  } finally {
    client.close();
  }
}

const HAND_MADE = `CREATE TABLE IF NOT EXISTS keys (
  id TEXT PRIMARY KEY, fingerprint TEXT NOT NULL, status TEXT NOT NULL, response TEXT, expires REAL NOT NULL)`;

describe('openSqliteStore', () => {
  it('creates the table, its index and sets WAL, busy timeout and synchronous', () => {
    const path = freshDbPath(dir);
    const store = openSqliteStore(path, { busyTimeoutMs: 1234 });
    store.close();
    expect(inspect(path)).toEqual(MIGRATED);
    const client = new Database(path);
    expect(client.pragma('journal_mode', { simple: true })).toBe('wal');
    client.close();
  });

  it('applies the documented pragmas on its own connection', () => {
    const path = freshDbPath(dir);
    const defaults = openSqliteStore(path);
    expect(defaults.db.$client.pragma('synchronous', { simple: true })).toBe(1);
    expect(defaults.db.$client.pragma('busy_timeout', { simple: true })).toBe(5000);
    defaults.close();
    const full = openSqliteStore(path, { synchronous: 'FULL', busyTimeoutMs: 250 });
    expect(full.db.$client.pragma('synchronous', { simple: true })).toBe(2);
    expect(full.db.$client.pragma('busy_timeout', { simple: true })).toBe(250);
    full.close();
    expect(defaults.db.$client.open).toBe(false);
  });

  it('refuses bad options before touching the path', () => {
    const path = freshDbPath(dir);
    expect(() => openSqliteStore(path, { synchronous: 'SOMETIMES' as 'FULL' })).toThrow(
      InvalidOptionError,
    );
    expect(() => openSqliteStore(path, { busyTimeoutMs: -1 })).toThrow(InvalidOptionError);
    expect(() => openSqliteStore(path, { busyTimeoutMs: 1.5 })).toThrow(InvalidOptionError);
    expect(existsSync(path)).toBe(false);
  });

  it('keeps existing rows and is a no-op when opened again', () => {
    const path = freshDbPath(dir);
    const first = openSqliteStore(path);
    first.reserve('a', 'd', 10);
    first.reserve('b', 'd', 10);
    first.finish('b', 'd', { ok: true });
    first.close();
    const before = readRows(path);
    for (let i = 0; i < 3; i++) openSqliteStore(path).close();
    expect(readRows(path)).toEqual(before);
    expect(inspect(path).migrations).toBe(MIGRATED.migrations);
  });

  it('adopts a keys table made by hand: rows stay, the index is added, later opens are no-ops', () => {
    const path = freshDbPath(dir);
    const client = new Database(path);
    client.exec(HAND_MADE);
    client
      .prepare(
        "INSERT INTO keys VALUES ('old', 'fp', 'done', '{\"r\":1}', 50), ('busy', 'fp', 'pending', NULL, 1)",
      )
      .run();
    client.close();
    const store = openSqliteStore(path);
    expect(store.fetch('old', 10)).toEqual({ r: 1 });
    expect(store.counts()).toEqual({ pending: 1, done: 1 });
    store.close();
    expect(inspect(path)).toEqual(MIGRATED);
    openSqliteStore(path).close();
    expect(inspect(path).migrations).toBe(MIGRATED.migrations);
    expect(readRows(path)).toHaveLength(2);
  });

  it.each([
    [
      'other columns',
      'CREATE TABLE keys (id TEXT PRIMARY KEY, value TEXT)',
      /missing column fingerprint.*unexpected column value/,
    ],
    [
      'an extra column',
      `CREATE TABLE keys (id TEXT PRIMARY KEY, fingerprint TEXT, status TEXT, response TEXT, expires REAL, owner TEXT)`,
      /unexpected column owner/,
    ],
    [
      'no primary key',
      'CREATE TABLE keys (id TEXT, fingerprint TEXT, status TEXT, response TEXT, expires REAL)',
      /primary key/,
    ],
    [
      'an integer expires',
      'CREATE TABLE keys (id TEXT PRIMARY KEY, fingerprint TEXT, status TEXT, response TEXT, expires INTEGER)',
      /expires is INTEGER/,
    ],
  ])(
    'refuses a keys table with %s and leaves the file byte-for-byte unchanged',
    (_, ddl, message) => {
      const path = freshDbPath(dir);
      const client = new Database(path);
      client.exec(ddl);
      client.close();
      const before = readFileSync(path);
      expect(() => openSqliteStore(path)).toThrow(SchemaMismatchError);
      expect(() => openSqliteStore(path)).toThrow(message);
      expect(readFileSync(path).equals(before)).toBe(true);
      expect(existsSync(`${path}-wal`)).toBe(false);
    },
  );

  it('refuses a file that is not a database, unchanged', () => {
    const path = join(dir, 'notes.txt');
    writeFileSync(path, 'these are not the pages you are looking for\n'.repeat(200));
    const before = readFileSync(path);
    expect(() => openSqliteStore(path)).toThrow(DatabaseOpenError);
    expect(() => openSqliteStore(path)).toThrow(/not a SQLite database/);
    expect(readFileSync(path).equals(before)).toBe(true);
  });

  it('refuses a directory and a path in a missing directory, creating nothing', () => {
    const folder = join(dir, 'a-folder');
    mkdirSync(folder);
    expect(() => openSqliteStore(folder)).toThrow(/is a directory/);
    const missing = join(dir, 'nope', 'deeper', 'store.db');
    expect(() => openSqliteStore(missing)).toThrow(DatabaseOpenError);
    expect(() => openSqliteStore(missing)).toThrow(/does not exist/);
    expect(existsSync(join(dir, 'nope'))).toBe(false);
    expect(() => openSqliteStore('')).toThrow(DatabaseOpenError);
  });

  it('works in memory', () => {
    const store = openSqliteStore(':memory:');
    expect(store.reserve('k', 'd', 1)).toBe(true);
    expect(store.counts()).toEqual({ pending: 1, done: 0 });
    store.close();
  });

  it('lets three processes initialise one fresh file at once', async () => {
    const path = freshDbPath(dir);
    const results = await Promise.all([1, 2, 3].map(() => runTs(fixture('init-store.ts'), [path])));
    for (const result of results) {
      expect(result.stderr).toBe('');
      expect(result.code).toBe(0);
      expect(JSON.parse(result.stdout)).toEqual({ pending: 0, done: 0 });
    }
    expect(inspect(path)).toEqual(MIGRATED);
  });
});

describe('SqliteIdempotencyStore over your own drizzle database', () => {
  const orders = sqliteTable('orders', { id: integer('id').primaryKey(), note: text('note') });

  it('shares the connection: a rolled-back transaction takes the reservation with it', () => {
    const client = new Database(freshDbPath(dir));
    const db = drizzle({ client, schema: { orders } });
    db.run(sql`CREATE TABLE orders (id INTEGER PRIMARY KEY, note TEXT)`);
    applySqliteMigrations(db);
    const store = new SqliteIdempotencyStore<{ order: number }>(db);

    expect(() =>
      db.transaction((tx) => {
        tx.insert(orders).values({ id: 1, note: 'first' }).run();
        store.reserve('order-1', 'd', 100);
        throw new Error('payment declined');
      }),
    ).toThrow('payment declined');
    expect(store.get('order-1')).toBeNull();

    db.transaction((tx) => {
      tx.insert(orders).values({ id: 2, note: 'second' }).run();
      store.reserve('order-2', 'd', 100);
      store.finish('order-2', 'd', { order: 2 });
    });
    expect(store.fetch('order-2', 0)).toEqual({ order: 2 });
    expect(db.select().from(orders).all()).toEqual([{ id: 2, note: 'second' }]);

    store.close();
    expect(client.open).toBe(true);
    client.close();
  });
});
