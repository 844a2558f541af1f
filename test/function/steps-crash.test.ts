import Database from 'better-sqlite3';
import { openSqliteStore } from '../../src/sqlite/index.js';
import { freshDbPath, tempDir } from '../support/temp.js';
import { stepsCrashSuite } from './steps-crash-suite.js';

const dir = tempDir('idem-steps-crash-');

function grouped(rows: { id: string; value: string | number }[]): Map<string, never> {
  return new Map(rows.map((row) => [row.id, row.value as never]));
}

stepsCrashSuite('SQLite (better-sqlite3)', async () => {
  const path = freshDbPath(dir);
  openSqliteStore(path).close();
  const client = new Database(path);
  client.exec('CREATE TABLE ledger (id TEXT NOT NULL, charge TEXT NOT NULL)');
  client.exec('CREATE TABLE outbox (id TEXT NOT NULL)');
  const all = (query: string, prefix: string) =>
    grouped(client.prepare(query).all(`${prefix}-%`) as { id: string; value: string | number }[]);
  return {
    args: ['sqlite', path],
    rows: async (table, prefix) =>
      all(`SELECT id, count(*) AS value FROM ${table} WHERE id LIKE ? GROUP BY id`, prefix),
    charges: async (prefix) =>
      all('SELECT id, charge AS value FROM ledger WHERE id LIKE ?', prefix),
    statuses: async (prefix) => all('SELECT id, status AS value FROM keys WHERE id LIKE ?', prefix),
    close: async () => {
      client.close();
    },
  };
});
