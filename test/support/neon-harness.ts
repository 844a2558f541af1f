import { neon, neonConfig } from '@neondatabase/serverless';
import { sql } from 'drizzle-orm';
import { drizzle } from 'drizzle-orm/neon-http';
import { afterAll } from 'vitest';
import type { Keyring } from '../../src/index.js';
import { quoteIdentifier } from '../../src/pg/identifier.js';
import {
  type AnyNeonHttpDatabase,
  applyNeonHttpMigrations,
  PgIdempotencyStore,
  pgKeysTable,
} from '../../src/pg/index.js';
import type { HarnessFactory } from '../contract/harness.js';
import { type NeonEndpoint, startNeonEndpoint } from './neon-endpoint.js';
import { readPgRows, seedPgRows, uniqueName } from './pg.js';

/** The neon-http driver of one test file, and the endpoint that answers it. */
export interface NeonConnection {
  /** A drizzle database over the driver; starts the endpoint on first use. */
  db(): Promise<AnyNeonHttpDatabase>;
  /** The endpoint, once started: what it served, and a way to lose its next answer. */
  readonly endpoint: NeonEndpoint | undefined;
}

/**
 * The driver's own HTTP transport, answered on 127.0.0.1 by an endpoint that runs the SQL on the
 * real server at `url`; the host in the connection string is never reached. The endpoint closes
 * when the test file ends.
 */
export function neonConnection(url: string): NeonConnection {
  let endpoint: NeonEndpoint | undefined;
  afterAll(async () => endpoint?.close());
  return {
    get endpoint() {
      return endpoint;
    },
    db: async () => {
      endpoint ??= await startNeonEndpoint(url);
      neonConfig.fetchEndpoint = endpoint.url;
      return drizzle({ client: neon('postgresql://app:secret@ep-serverless.neon.invalid/test') });
    },
  };
}

let shared: NeonConnection | undefined;

/**
 * A harness over neon-http on the server at `url`: one migrated schema per test file, emptied
 * before each test and dropped when the file ends.
 */
export function neonHarness(url: string, name = 'keys', encryption?: Keyring): HarnessFactory {
  // One endpoint for the file: the driver reaches it through a global setting.
  shared ??= neonConnection(url);
  const connection = shared;
  const schema = uniqueName('serverless_neon');
  const table = pgKeysTable(name, { schema });
  let migrated: Promise<AnyNeonHttpDatabase> | undefined;
  afterAll(async () => {
    if (migrated) {
      await (await migrated).execute(sql.raw(`DROP SCHEMA ${quoteIdentifier(schema)} CASCADE`));
    }
  });
  return async () => {
    migrated ??= connection.db().then(async (db) => {
      await applyNeonHttpMigrations(db, { table });
      return db;
    });
    const db = await migrated;
    await db.execute(sql.raw(`DELETE FROM ${quoteIdentifier(schema)}.${quoteIdentifier(name)}`));
    const store = new PgIdempotencyStore(db, { table, encryption });
    return {
      store,
      rows: () => readPgRows(db, schema, name),
      seed: (rows) => seedPgRows(db, schema, rows, name),
      close: () => store.close(),
    };
  };
}
