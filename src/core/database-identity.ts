import { UnrecognisedDatabaseError } from './errors.js';

function describe(value: unknown): string {
  if (value === null) return 'null';
  if (typeof value !== 'object' && typeof value !== 'function') return typeof value;
  const name = (value as { constructor?: { name?: unknown } }).constructor?.name;
  return typeof name === 'string' && name.length > 0 ? `a ${name}` : 'an object';
}

/**
 * The driver client under a drizzle database (its `$client`).
 *
 * @param db - what the store was given
 * @param driver - the drizzle driver module the store expects, e.g. `better-sqlite3`
 * @throws {@link UnrecognisedDatabaseError} when `db` is not a drizzle database
 */
export function drizzleClientOf(db: unknown, driver: string): unknown {
  if ((typeof db !== 'object' && typeof db !== 'function') || db === null || !('$client' in db)) {
    throw new UnrecognisedDatabaseError(
      `expected a drizzle database from drizzle-orm/${driver}, made with drizzle({ client }), got ${describe(db)}`,
    );
  }
  return (db as { $client: unknown }).$client;
}

/**
 * Checks that a drizzle database runs on the very client it was made over. drizzle 1.0 reads a
 * lone client argument, `drizzle(client)`, as a config object and opens a client of its own (for
 * SQLite, a temporary in-memory database): the store would then answer from a database nobody
 * else sees and lose it on close.
 *
 * @param db - the drizzle database
 * @param client - the client it must run on
 * @param driver - the drizzle driver module, for the message
 * @throws {@link UnrecognisedDatabaseError} when `db` runs on another client
 */
export function assertBackedBy(db: unknown, client: unknown, driver: string): void {
  if (drizzleClientOf(db, driver) !== client) {
    throw new UnrecognisedDatabaseError(
      `the drizzle database does not run on the ${driver} client it was made over; make it with drizzle({ client })`,
    );
  }
}
