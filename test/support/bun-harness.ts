import { getTableConfig } from 'drizzle-orm/sqlite-core';
import { type OpenBunSqliteStoreOptions, openBunSqliteStore } from '../../src/bun-sqlite/index.js';
import type { HarnessFactory, RawRow } from '../contract/harness.js';
import { freshDbPath } from './temp.js';

/** Whether this process is Bun: bun:sqlite exists nowhere else. */
export const underBun = 'Bun' in globalThis;

/**
 * A harness over a fresh SQLite file in `dir`, opened through bun:sqlite with
 * `openBunSqliteStore`. The rows are read and seeded through bun:sqlite's `Database`, since
 * better-sqlite3 does not load under Bun.
 */
export function bunSqliteHarness(
  dir: string,
  options: OpenBunSqliteStoreOptions = {},
): HarnessFactory {
  return async () => {
    const path = freshDbPath(dir);
    const store = await openBunSqliteStore(path, options);
    const table = options.table === undefined ? 'keys' : getTableConfig(options.table).name;
    const client = store.db.$client;
    return {
      store,
      // Read through a connection of its own, so rows are read from the file after close() too.
      rows: async () => {
        const reader = new (client.constructor as new (file: string) => typeof client)(path);
        try {
          return reader
            .prepare(
              `SELECT id, fingerprint, status, response, expires FROM "${table}" ORDER BY id`,
            )
            .all() as RawRow[];
        } finally {
          reader.close();
        }
      },
      seed: async (rows) => {
        const insert = client.prepare(
          `INSERT INTO "${table}" (id, fingerprint, status, response, expires) VALUES (?, ?, ?, ?, ?)`,
        );
        client.transaction(() => {
          for (const row of rows) {
            insert.run(row.id, row.fingerprint, row.status, row.response, row.expires);
          }
        })();
      },
      close: async () => store.close(),
    };
  };
}
