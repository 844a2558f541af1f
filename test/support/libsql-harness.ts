import { pathToFileURL } from 'node:url';
import { getTableConfig } from 'drizzle-orm/sqlite-core';
import { type OpenLibsqlStoreOptions, openLibsqlStore } from '../../src/libsql/index.js';
import type { HarnessFactory } from '../contract/harness.js';
import { startHranaEndpoint } from './hrana-endpoint.js';
import { readRows, seedRows } from './sqlite-harness.js';
import { freshDbPath } from './temp.js';

/** The `file:` URL of a SQLite file path. */
export function fileUrl(path: string): string {
  return pathToFileURL(path).href;
}

/**
 * A harness over a fresh SQLite file in `dir`, opened through libSQL with `openLibsqlStore`. The
 * rows are read and seeded with better-sqlite3, so the contract also shows that both drivers see
 * one file the same way.
 */
export function libsqlHarness(dir: string, options: OpenLibsqlStoreOptions = {}): HarnessFactory {
  return async () => {
    const path = freshDbPath(dir);
    const store = await openLibsqlStore(fileUrl(path), options);
    const table = options.table === undefined ? 'keys' : getTableConfig(options.table).name;
    return {
      store,
      rows: async () => readRows(path, table),
      seed: async (rows) => seedRows(path, rows, table),
      close: async () => store.close(),
    };
  };
}

/** The token the remote harness's endpoint accepts. */
export const REMOTE_TOKEN = 'serverless-test-token';

/**
 * A harness over a remote libSQL database as @libsql/client's HTTP transport reaches Turso or
 * sqld: a local Hrana endpoint over a fresh SQLite file in `dir`, which better-sqlite3 reads and
 * seeds directly. Each test gets its own endpoint, closed with the store.
 */
export function remoteLibsqlHarness(
  dir: string,
  options: OpenLibsqlStoreOptions = {},
): HarnessFactory {
  return async () => {
    const path = freshDbPath(dir);
    const endpoint = await startHranaEndpoint(path, REMOTE_TOKEN);
    const store = await openLibsqlStore(endpoint.url, { ...options, authToken: REMOTE_TOKEN });
    const table = options.table === undefined ? 'keys' : getTableConfig(options.table).name;
    return {
      store,
      rows: async () => readRows(path, table),
      seed: async (rows) => seedRows(path, rows, table),
      close: async () => {
        await store.close();
        await endpoint.close();
      },
    };
  };
}
