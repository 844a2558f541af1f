import { openBunSqliteStore } from '../../src/bun-sqlite/index.js';
import type { LeasedIdempotencyStore } from '../../src/index.js';
import { openLibsqlStore } from '../../src/libsql/index.js';
import { openSqliteStore, openSqliteWorkerStore } from '../../src/sqlite/index.js';
import { underBun } from './bun-harness.js';
import { fileUrl } from './libsql-harness.js';
import { mysqlHarness, mysqlUrl } from './mysql.js';
import { pgliteHarness, serverHarness, serverUrl } from './pg.js';
import { freshDbPath, tempDir } from './temp.js';

/** A fresh, empty store of one dialect, for the HTTP tests. */
export interface StoreFactory {
  readonly name: string;
  open(): Promise<{ store: LeasedIdempotencyStore<unknown>; close(): Promise<void> }>;
}

/**
 * Every dialect the HTTP and function layers are tested on: a SQLite file through better-sqlite3
 * and through libSQL, PostgreSQL in process through PGlite (so the PostgreSQL store runs without a
 * server), the real PostgreSQL server whenever `DATABASE_URL` is set and the real MySQL server
 * whenever `MYSQL_URL` is set (CI sets both; if one is set but unreachable, the tests fail rather
 * than skip). Call it at the top level of a test file: it makes a temporary directory, a PGlite
 * database and a pool, created on first use and cleaned up when the file ends. A dialect is one
 * more entry.
 */
export function storeFactories(): StoreFactory[] {
  const dir = tempDir('idem-http-');
  const url = serverUrl();
  const server: StoreFactory[] =
    url === undefined ? [] : [{ name: 'PostgreSQL server', open: serverHarness(url) }];
  const mysql = mysqlUrl();
  if (mysql !== undefined) server.push({ name: 'MySQL server', open: mysqlHarness(mysql) });
  // Under Bun, better-sqlite3 does not load: bun:sqlite is its SQLite there. The run under Bun is
  // about bun:sqlite, so PGlite (the same store as under Node) stays out of it.
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
    { name: 'PGlite', open: pgliteHarness() },
    ...server,
  ];
}

/**
 * The SQLite store whose statements run on a worker thread, on a fresh file in its own temporary
 * directory. Not one of {@link storeFactories}: each store starts a thread, which from the sources
 * costs a second or more, so only the HTTP behaviour suite runs on it besides its own contract.
 */
export function sqliteWorkerFactory(): StoreFactory {
  const dir = tempDir('idem-http-worker-');
  return {
    name: 'SQLite file on a worker thread',
    open: async () => {
      const store = await openSqliteWorkerStore(freshDbPath(dir));
      return { store, close: () => store.close() };
    },
  };
}
