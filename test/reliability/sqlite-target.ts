import Database from 'better-sqlite3';
import { openSqliteStore, sqliteTransaction } from '../../src/sqlite/index.js';
import type { RawRow } from '../contract/harness.js';
import type { TransactionalModelTarget } from './commands.js';

/**
 * One store (and its transactional runner) over one SQLite file for a whole model run, with a second connection to read and
 * empty the table between sequences (creating a file per sequence would dominate the run).
 */
export function sqliteTarget(path: string): TransactionalModelTarget & { close(): void } {
  const store = openSqliteStore(path);
  const client = new Database(path);
  const all = client.prepare('SELECT id, fingerprint, status, response, expires FROM keys');
  const clear = client.prepare('DELETE FROM keys');
  return {
    store,
    transaction: sqliteTransaction(store),
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
