import Database from 'better-sqlite3';
import { openSqliteStore } from '../../src/sqlite/index.js';
import type { RawRow } from '../contract/harness.js';
import type { ModelTarget } from './commands.js';

/**
 * One store over one SQLite file for a whole model run, with a second connection to read and
 * empty the table between sequences (creating a file per sequence would dominate the run).
 */
export function sqliteTarget(path: string): ModelTarget & { close(): void } {
  const store = openSqliteStore(path);
  const client = new Database(path);
  const all = client.prepare('SELECT id, fingerprint, status, response, expires FROM keys');
  const clear = client.prepare('DELETE FROM keys');
  return {
    store,
    rows: async () => all.all() as RawRow[],
    clear: async () => {
      clear.run();
    },
    close: () => {
      client.close();
      store.close();
    },
  };
}
