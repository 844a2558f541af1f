import { mysqlKeysTable } from '../../src/mysql/index.js';
import { sqliteKeysTable } from '../../src/sqlite-dialect/schema.js';
import { bunSqliteHarness } from '../support/bun-harness.js';
import { libsqlHarness, remoteLibsqlHarness } from '../support/libsql-harness.js';
import { mysqlHarness, mysqlUrl } from '../support/mysql.js';
import { neonHarness } from '../support/neon-harness.js';
import { pgliteHarness, postgresJsHarness, serverHarness, serverUrl } from '../support/pg.js';
import { planetscaleHarness } from '../support/planetscale-harness.js';
import { groupCommitHarness, sqliteHarness, workerHarness } from '../support/sqlite-harness.js';
import { tempDir } from '../support/temp.js';
import type { HarnessFactory } from './harness.js';
import type { StoreVariant } from './variants.js';

/**
 * What a store needs beyond Node: a runtime that runs its driver, or a server whose URL is in an
 * environment variable.
 */
type StoreEnvironment = 'node' | 'bun' | 'DATABASE_URL' | 'MYSQL_URL';

/** The test file that runs a store's contracts, so that files stay small and run side by side. */
export type StoreGroup = 'sqlite' | 'sqlite-thread' | 'bun' | 'pg' | 'mysql';

/** One store of the table that Node (or Bun) opens: how to open it fresh, and where it can run. */
export interface StoreEntry {
  readonly name: string;
  readonly group: StoreGroup;
  readonly needs: StoreEnvironment;
  /**
   * Which HTTP and function suites run over it too (see `test/support/store-factories.ts`): every
   * one, only the HTTP behaviour suite, or none.
   */
  readonly http: 'every' | 'behaviour' | 'none';
  /**
   * A harness over a fresh, empty store opened as `variant` says. Called once per suite at
   * collection time, so it may register the file's clean-up hooks.
   */
  harness(variant: StoreVariant): HarnessFactory;
}

/**
 * One store of the table that only exists inside workerd: `test/workerd/contract-worker.ts` opens
 * it there by `binding`, and `test/runtimes/workerd-contract.test.ts` runs the contracts over it.
 */
export interface WorkerdStoreEntry {
  readonly name: string;
  readonly needs: 'workerd';
  readonly binding: WorkerdBinding;
}

/** What a workerd store keeps its rows in. */
export type WorkerdBinding = 'd1' | 'durable-object';

// The keys table `name` of the SQLite dialect, or the driver's default table for `keys`.
const sqliteTable = (name: string) => (name === 'keys' ? {} : { table: sqliteKeysTable(name) });
const encryptionOf = ({ encryption }: StoreVariant) =>
  encryption === undefined ? {} : { encryption };
const sqliteOptions = (variant: StoreVariant) => ({
  ...sqliteTable(variant.table),
  ...encryptionOf(variant),
});
// A harness is only built once its environment was found, so the URL is set.
const serverOf = (url: string | undefined) => url as string;
// The MySQL store over mysql2 on the server, in one of its modes.
const mysqlServer =
  (mode: { readonly viaDrizzle?: boolean; readonly vitess?: boolean; readonly batch?: boolean }) =>
  (variant: StoreVariant) =>
    mysqlHarness(serverOf(mysqlUrl()), {
      table: mysqlKeysTable(variant.table),
      ...mode,
      ...encryptionOf(variant),
    });

/**
 * Every store the library ships, each with what it needs. The store and lease contracts run over
 * every entry and every variant; the HTTP and function suites over the entries marked `http`. A
 * store is one more entry.
 */
const STORES: readonly (StoreEntry | WorkerdStoreEntry)[] = [
  {
    name: 'SQLite file',
    group: 'sqlite',
    needs: 'node',
    http: 'every',
    harness: (variant) => sqliteHarness(tempDir(), sqliteOptions(variant)),
  },
  {
    name: 'SQLite file with an answer cache',
    group: 'sqlite',
    needs: 'node',
    http: 'none',
    harness: (variant) =>
      sqliteHarness(tempDir(), { ...sqliteOptions(variant), answerCacheSize: 64 }),
  },
  {
    name: 'SQLite file with group commit',
    group: 'sqlite',
    needs: 'node',
    http: 'none',
    harness: (variant) => groupCommitHarness(tempDir(), sqliteOptions(variant)),
  },
  {
    name: 'SQLite file on a worker thread',
    group: 'sqlite-thread',
    needs: 'node',
    // Each store starts a thread, which from the sources costs a second or more.
    http: 'behaviour',
    harness: (variant) =>
      workerHarness(tempDir(), { ...sqliteOptions(variant), answerCacheSize: 100 }),
  },
  {
    name: 'libSQL file',
    group: 'sqlite',
    needs: 'node',
    http: 'every',
    harness: (variant) => libsqlHarness(tempDir(), sqliteOptions(variant)),
  },
  {
    name: 'remote libSQL over HTTP',
    group: 'sqlite',
    needs: 'node',
    http: 'none',
    harness: (variant) => remoteLibsqlHarness(tempDir(), sqliteOptions(variant)),
  },
  {
    name: 'bun:sqlite file',
    group: 'bun',
    needs: 'bun',
    http: 'every',
    harness: (variant) => bunSqliteHarness(tempDir(), sqliteOptions(variant)),
  },
  {
    name: 'PGlite',
    group: 'pg',
    needs: 'node',
    http: 'every',
    harness: (variant) => pgliteHarness(variant.table, encryptionOf(variant)),
  },
  {
    // The batched statements through drizzle's prepared queries, arrays bound by PGlite.
    name: 'PGlite, batching',
    group: 'pg',
    needs: 'node',
    http: 'none',
    harness: (variant) => pgliteHarness(variant.table, { batch: true, ...encryptionOf(variant) }),
  },
  {
    name: 'PostgreSQL server, node-postgres',
    group: 'pg',
    needs: 'DATABASE_URL',
    http: 'every',
    harness: (variant) =>
      serverHarness(serverOf(serverUrl()), variant.table, encryptionOf(variant)),
  },
  {
    // Concurrent claims, finishes and reads batched into one statement per kind.
    name: 'PostgreSQL server, node-postgres, batching',
    group: 'pg',
    needs: 'DATABASE_URL',
    http: 'behaviour',
    harness: (variant) =>
      serverHarness(serverOf(serverUrl()), variant.table, {
        batch: true,
        ...encryptionOf(variant),
      }),
  },
  {
    name: 'PostgreSQL server, postgres-js',
    group: 'pg',
    needs: 'DATABASE_URL',
    http: 'none',
    harness: (variant) =>
      postgresJsHarness(serverOf(serverUrl()), variant.table, encryptionOf(variant)),
  },
  {
    name: 'neon-http',
    group: 'pg',
    needs: 'DATABASE_URL',
    http: 'none',
    harness: (variant) => neonHarness(serverOf(serverUrl()), variant.table, variant.encryption),
  },
  {
    name: 'MySQL server',
    group: 'mysql',
    needs: 'MYSQL_URL',
    http: 'every',
    harness: mysqlServer({}),
  },
  {
    // Concurrent claims, finishes and reads batched into one statement per kind.
    name: 'MySQL server, batching',
    group: 'mysql',
    needs: 'MYSQL_URL',
    http: 'behaviour',
    harness: mysqlServer({ batch: true }),
  },
  {
    // With a logger on the database, the store runs every statement through drizzle.
    name: 'MySQL server, through drizzle',
    group: 'mysql',
    needs: 'MYSQL_URL',
    http: 'none',
    harness: mysqlServer({ viaDrizzle: true }),
  },
  {
    // The PlanetScale option over mysql2, as for a self-hosted Vitess.
    name: 'MySQL server, mysql2 with vitess: true',
    group: 'mysql',
    needs: 'MYSQL_URL',
    http: 'none',
    harness: mysqlServer({ vitess: true }),
  },
  {
    name: 'PlanetScale driver',
    group: 'mysql',
    needs: 'MYSQL_URL',
    http: 'none',
    harness: (variant) =>
      planetscaleHarness(serverOf(mysqlUrl()), mysqlKeysTable(variant.table), variant.encryption),
  },
  { name: 'D1', needs: 'workerd', binding: 'd1' },
  { name: 'Durable Object SQLite storage', needs: 'workerd', binding: 'durable-object' },
];

/** The stores of the table that Node or Bun open themselves. */
export const NODE_STORES: readonly StoreEntry[] = STORES.filter(
  (entry): entry is StoreEntry => entry.needs !== 'workerd',
);

/** The stores of the table that only exist inside workerd. */
export const WORKERD_STORES: readonly WorkerdStoreEntry[] = STORES.filter(
  (entry): entry is WorkerdStoreEntry => entry.needs === 'workerd',
);
