import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { describe, expect, it } from 'vitest';
import { DatabaseOpenError, InvalidOptionError, SchemaMismatchError } from '../../src/index.js';
import { openLibsqlStore } from '../../src/libsql/index.js';
import { openSqliteStore } from '../../src/sqlite/index.js';
import { fileUrl } from '../support/libsql-harness.js';
import { readRows } from '../support/sqlite-harness.js';
import { freshDbPath, tempDir } from '../support/temp.js';

const dir = tempDir('idem-libsql-open-');

describe('openLibsqlStore', () => {
  it('creates the table and its index, sets WAL and the busy timeout on its connections', async () => {
    const path = freshDbPath(dir);
    const store = await openLibsqlStore(fileUrl(path), { busyTimeoutMs: 1234 });
    const timeout = await store.db.$client.execute('PRAGMA busy_timeout');
    expect(Object.values(timeout.rows[0] ?? {})).toEqual([1234]);
    await store.close();
    expect(store.db.$client.closed).toBe(true);
    const client = new Database(path, { readonly: true });
    try {
      expect(client.pragma('journal_mode', { simple: true })).toBe('wal');
      const indexes = client
        .prepare("SELECT name FROM sqlite_master WHERE type = 'index' AND sql IS NOT NULL")
        .pluck()
        .all();
      expect(indexes).toEqual(['keys_status_expires_id_idx', 'keys_done_id_expires_idx']);
    } finally {
      client.close();
    }
  });

  it('opens a file the better-sqlite3 store made, and the other way round, keeping rows', async () => {
    const path = freshDbPath(dir);
    const sync = openSqliteStore(path);
    sync.reserve('a', 'd', 10);
    sync.finish('a', 'd', { r: 1 });
    sync.close();
    const store = await openLibsqlStore(fileUrl(path));
    expect(await store.fetch('a', 5)).toEqual({ r: 1 });
    expect(await store.reserve('b', 'e', 20)).toBe(true);
    await store.close();
    const again = openSqliteStore(path);
    expect(again.get('b')).toMatchObject({ status: 'pending', fingerprint: 'e', expires: 20 });
    again.close();
  });

  it('refuses bad options, URLs that are not libSQL ones and unreachable servers before creating anything', async () => {
    const path = freshDbPath(dir);
    await expect(openLibsqlStore(fileUrl(path), { busyTimeoutMs: -1 })).rejects.toBeInstanceOf(
      InvalidOptionError,
    );
    await expect(openLibsqlStore(fileUrl(path), { busyTimeoutMs: 1.5 })).rejects.toBeInstanceOf(
      InvalidOptionError,
    );
    for (const url of [
      path,
      'libsql://example.invalid',
      'http://127.0.0.1:1',
      '',
      'file::memory:',
    ]) {
      await expect(openLibsqlStore(url)).rejects.toBeInstanceOf(DatabaseOpenError);
    }
    await expect(openLibsqlStore(5 as unknown as string)).rejects.toBeInstanceOf(DatabaseOpenError);
    expect(existsSync(path)).toBe(false);
  });

  it('refuses a missing directory, a directory and a file that is not a database', async () => {
    const notDb = join(dir, 'notes.txt');
    const text = 'these are notes, not a SQLite database, and they must stay as they are\n';
    writeFileSync(notDb, text);
    for (const path of [join(dir, 'missing', 'store.db'), dir, notDb]) {
      const failure = openLibsqlStore(fileUrl(path));
      await expect(failure).rejects.toBeInstanceOf(DatabaseOpenError);
    }
    await expect(openLibsqlStore(fileUrl(notDb))).rejects.toThrow(/not a SQLite database/);
    expect(readFileSync(notDb, 'utf8')).toBe(text);
  });

  it('adopts a hand-made table with the contract columns and refuses a foreign one unchanged', async () => {
    const adopted = freshDbPath(dir);
    const client = new Database(adopted);
    client.exec(
      'CREATE TABLE keys (id TEXT PRIMARY KEY, fingerprint TEXT NOT NULL, status TEXT NOT NULL, response TEXT, expires REAL NOT NULL)',
    );
    client.prepare("INSERT INTO keys VALUES ('old', 'd', 'done', '{\"r\":1}', 50)").run();
    client.close();
    const store = await openLibsqlStore(fileUrl(adopted));
    expect(await store.fetch('old', 10)).toEqual({ r: 1 });
    await store.close();
    expect(readRows(adopted)).toHaveLength(1);

    const foreign = freshDbPath(dir);
    const other = new Database(foreign);
    other.exec('CREATE TABLE keys (id INTEGER PRIMARY KEY, secret TEXT)');
    other.prepare("INSERT INTO keys VALUES (1, 'api-key')").run();
    other.close();
    await expect(openLibsqlStore(fileUrl(foreign))).rejects.toBeInstanceOf(SchemaMismatchError);
    const after = new Database(foreign, { readonly: true });
    try {
      expect(after.prepare('SELECT * FROM keys').all()).toEqual([{ id: 1, secret: 'api-key' }]);
      const tables = after.prepare("SELECT name FROM sqlite_master WHERE type = 'table'").pluck();
      expect(tables.all()).toEqual(['keys']);
    } finally {
      after.close();
    }
  });
});
