import { openBunSqliteStore } from '../../src/bun-sqlite/index.js';
import type { IdempotencyStore } from '../../src/index.js';
import { openLibsqlStore } from '../../src/libsql/index.js';
import { openSqliteStore } from '../../src/sqlite/index.js';
import { underBun } from './bun-harness.js';
import { fileUrl } from './libsql-harness.js';
import { mysqlHarness, mysqlUrl } from './mysql.js';
import { serverHarness, serverUrl } from './pg.js';
import { freshDbPath, tempDir } from './temp.js';

/** A fresh, empty store of one dialect, for the HTTP tests. */
export interface StoreFactory {
  readonly name: string;
  open(): Promise<{ store: IdempotencyStore<unknown>; close(): Promise<void> }>;
}

/**
 * Every dialect the HTTP layer is tested on: a SQLite file through better-sqlite3 and through
 * libSQL, the real PostgreSQL server whenever `DATABASE_URL` is set and the real MySQL server
 * whenever `MYSQL_URL` is set (CI sets both; if one is set but unreachable, the tests fail rather
 * than skip). Call it at the top level of a test file: it makes a temporary directory and a pool
 * that are cleaned up when the file ends. A dialect is one more entry.
 */
export function storeFactories(): StoreFactory[] {
  const dir = tempDir('idem-http-');
  const url = serverUrl();
  const server: StoreFactory[] =
    url === undefined ? [] : [{ name: 'PostgreSQL server', open: serverHarness(url) }];
  const mysql = mysqlUrl();
  if (mysql !== undefined) server.push({ name: 'MySQL server', open: mysqlHarness(mysql) });
  // Under Bun, better-sqlite3 does not load: bun:sqlite is its SQLite there.
  if (underBun) {
    return [
      {
        name: 'bun:sqlite file',
        open: async () => {
          const store = await openBunSqliteStore(freshDbPath(dir));
          return { store, close: async () => store.close() };
        },
      },
      ...server,
    ];
  }
  return [
    {
      name: 'SQLite file',
      open: async () => {
        const store = openSqliteStore(freshDbPath(dir));
        return { store, close: async () => store.close() };
      },
    },
    {
      name: 'libSQL file',
      open: async () => {
        const store = await openLibsqlStore(fileUrl(freshDbPath(dir)));
        return { store, close: async () => store.close() };
      },
    },
    ...server,
  ];
}
