import Database from 'better-sqlite3';
import { getTableConfig } from 'drizzle-orm/sqlite-core';
import type { LeasedIdempotencyStore } from '../../src/index.js';
import {
  type OpenSqliteStoreOptions,
  openSqliteStore,
  openSqliteWorkerStore,
  SqliteGroupCommitStore,
} from '../../src/sqlite/index.js';
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

/** How a harness opens its store on a fresh file. */
type OpenOnFile = (
  path: string,
  options: OpenSqliteStoreOptions,
) => Promise<LeasedIdempotencyStore & { close(): unknown }>;

function fileHarness(
  dir: string,
  options: OpenSqliteStoreOptions,
  open: OpenOnFile,
): HarnessFactory {
  return async () => {
    const path = freshDbPath(dir);
    const store = await open(path, options);
    const table = options.table === undefined ? 'keys' : getTableConfig(options.table).name;
    return {
      store,
      rows: async () => readRows(path, table),
      seed: async (rows) => seedRows(path, rows, table),
      close: async () => {
        await store.close();
      },
    };
  };
}

/** A harness over a fresh SQLite file in `dir`, opened with `openSqliteStore` and `options`. */
export function sqliteHarness(dir: string, options: OpenSqliteStoreOptions = {}): HarnessFactory {
  return fileHarness(dir, options, async (path, opened) => openSqliteStore(path, opened));
}

/** As {@link sqliteHarness}, with the store's writes grouped by a `SqliteGroupCommitStore`. */
export function groupCommitHarness(
  dir: string,
  options: OpenSqliteStoreOptions = {},
): HarnessFactory {
  return fileHarness(
    dir,
    options,
    async (path, opened) => new SqliteGroupCommitStore(openSqliteStore(path, opened)),
  );
}

/** As {@link sqliteHarness}, with the store's statements on a worker thread. */
export function workerHarness(dir: string, options: OpenSqliteStoreOptions = {}): HarnessFactory {
  return fileHarness(dir, options, openSqliteWorkerStore);
}
