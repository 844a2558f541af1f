import Database from 'better-sqlite3';
import { getTableConfig } from 'drizzle-orm/sqlite-core';
import { type OpenSqliteStoreOptions, openSqliteStore } from '../../src/sqlite/index.js';
import type { HarnessFactory, RawRow } from '../contract/harness.js';
import { freshDbPath } from './temp.js';

/** Reads every row of a SQLite store file directly, ordered by id. */
export function readRows(path: string, table = 'keys'): RawRow[] {
  const client = new Database(path, { readonly: true });
  try {
    return client
      .prepare(`SELECT id, fingerprint, status, response, expires FROM "${table}" ORDER BY id`)
      .all() as RawRow[];
  } finally {
    client.close();
  }
}

/** Inserts rows into a SQLite store file directly, bypassing the store. */
export function seedRows(path: string, rows: RawRow[], table = 'keys'): void {
  const client = new Database(path);
  try {
    const insert = client.prepare(
      `INSERT INTO "${table}" (id, fingerprint, status, response, expires) VALUES (@id, @fingerprint, @status, @response, @expires)`,
    );
    client.transaction(() => {
      for (const row of rows) insert.run(row);
    })();
  } finally {
    client.close();
  }
}

/** A harness over a fresh SQLite file in `dir`, opened with `openSqliteStore` and `options`. */
export function sqliteHarness(dir: string, options: OpenSqliteStoreOptions = {}): HarnessFactory {
  return async () => {
    const path = freshDbPath(dir);
    const store = openSqliteStore(path, options);
    const table = options.table === undefined ? 'keys' : getTableConfig(options.table).name;
    return {
      store,
      rows: async () => readRows(path, table),
      seed: async (rows) => seedRows(path, rows, table),
      close: async () => store.close(),
    };
  };
}
