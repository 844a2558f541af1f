// The step suite on libSQL: a local file, and a remote database over HTTP (a local Hrana endpoint
// over a real SQLite file, as @libsql/client reaches Turso or sqld).
import { sql } from 'drizzle-orm';
import {
  type LibsqlIdempotencyStore,
  libsqlSteps,
  openLibsqlStore,
} from '../../src/libsql/index.js';
import type { LibsqlHandlerTransaction } from '../../src/libsql/transaction.js';
import { startHranaEndpoint } from '../support/hrana-endpoint.js';
import { fileUrl } from '../support/libsql-harness.js';
import { freshDbPath, tempDir } from '../support/temp.js';
import { type StepsHarness, stepsSuite } from './steps-suite.js';

const TOKEN = 'steps-test-token';

async function libsqlHarness(
  url: string,
  options: { authToken?: string },
  done: () => Promise<void>,
): Promise<StepsHarness<LibsqlHandlerTransaction>> {
  const store = await openLibsqlStore(url, options);
  await store.db.run(sql`CREATE TABLE ledger (id TEXT NOT NULL)`);
  const others: LibsqlIdempotencyStore<unknown>[] = [];
  return {
    store,
    steps: (stepOptions) => libsqlSteps(store, stepOptions),
    ledger: (tx, id) => tx.run(sql`INSERT INTO ledger (id) VALUES (${id})`),
    ledgerRows: async (id) =>
      Number(
        (await store.db.get<{ n: number }>(sql`SELECT count(*) AS n FROM ledger WHERE id = ${id}`))
          ?.n,
      ),
    // all(), not get(): drizzle's libSQL get() throws on no row.
    stepsColumn: async (key) => {
      const rows = await store.db.all<{ steps: string | null }>(
        sql`SELECT steps FROM keys WHERE id = ${key}`,
      );
      return rows[0]?.steps ?? null;
    },
    reopen: async (encryption) => {
      const other = await openLibsqlStore(url, {
        ...options,
        ...(encryption === undefined ? {} : { encryption }),
      });
      others.push(other);
      return { store: other, steps: (stepOptions) => libsqlSteps(other, stepOptions) };
    },
    close: async () => {
      for (const other of others) await other.close();
      await store.close();
      await done();
    },
  };
}

const dir = tempDir('idem-steps-libsql-');

stepsSuite('libSQL (file)', () =>
  libsqlHarness(fileUrl(freshDbPath(dir)), {}, async () => undefined),
);

stepsSuite('libSQL (remote over HTTP)', async () => {
  const endpoint = await startHranaEndpoint(freshDbPath(dir), TOKEN);
  return libsqlHarness(endpoint.url, { authToken: TOKEN }, () => endpoint.close());
});
