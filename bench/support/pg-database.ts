import pg from 'pg';
import { quoteIdentifier } from '../../src/pg/identifier.js';
import { dropServerDatabase } from '../../test/support/pg.js';

/** The server every PostgreSQL benchmark runs on. */
const PG_URL = 'postgres://postgres@127.0.0.1:5432/test';

/** A database a benchmark made for itself on the server, dropped by `drop`. */
export interface BenchDatabase {
  /** Its connection string. */
  readonly url: string;
  /** Its name, as PgBouncer's configuration names it. */
  readonly name: string;
  /** Drops it, ending any connection still open to it. */
  drop(): Promise<void>;
}

async function onServer(statement: string): Promise<void> {
  const client = new pg.Client({ connectionString: PG_URL });
  await client.connect();
  try {
    await client.query(statement);
  } finally {
    await client.end();
  }
}

/**
 * Creates an empty database named `<prefix>_<pid>` beside the server's `test` database, so a
 * benchmark run's tables and statistics are its own and nothing of it outlives the run.
 */
export async function createBenchDatabase(prefix: string): Promise<BenchDatabase> {
  const name = `${prefix}_${process.pid}`;
  await dropServerDatabase(PG_URL, name);
  await onServer(`CREATE DATABASE ${quoteIdentifier(name)}`);
  const url = new URL(PG_URL);
  url.pathname = `/${name}`;
  return {
    url: url.toString(),
    name,
    drop: () => dropServerDatabase(PG_URL, name),
  };
}

/**
 * A node-postgres pool for a benchmark. A connection the server ends (a database dropped at the
 * end of a group) makes an idle client emit `error`; unheard, that would end the whole run before
 * `bench/results.json` is written, so the pool hears it and drops the client.
 */
export function benchPool(url: string, max: number): pg.Pool {
  const pool = new pg.Pool({ connectionString: url, max });
  pool.on('error', () => undefined);
  return pool;
}
