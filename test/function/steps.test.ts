import { sql } from 'drizzle-orm';
import {
  openSqliteStore,
  type SqliteIdempotencyStore,
  sqliteSteps,
} from '../../src/sqlite/index.js';
import { freshDbPath, tempDir } from '../support/temp.js';
import { stepsSuite } from './steps-suite.js';

const dir = tempDir('idem-steps-');

stepsSuite('SQLite (better-sqlite3)', async () => {
  const path = freshDbPath(dir);
  const store = openSqliteStore(path);
  const others: SqliteIdempotencyStore<unknown>[] = [];
  store.db.run(sql`CREATE TABLE ledger (id TEXT NOT NULL)`);
  return {
    store,
    steps: (options) => sqliteSteps(store, options),
    ledger: (tx, id) => tx.run(sql`INSERT INTO ledger (id) VALUES (${id})`),
    ledgerRows: async (id) =>
      Number(
        store.db.get<{ n: number }>(sql`SELECT count(*) AS n FROM ledger WHERE id = ${id}`)?.n,
      ),
    stepsColumn: async (key) =>
      store.db.get<{ steps: string | null }>(sql`SELECT steps FROM keys WHERE id = ${key}`)
        ?.steps ?? null,
    reopen: async (encryption) => {
      const other = openSqliteStore(path, encryption === undefined ? {} : { encryption });
      others.push(other);
      return { store: other, steps: (options) => sqliteSteps(other, options) };
    },
    close: async () => {
      for (const other of others) other.close();
      store.close();
    },
  };
});
