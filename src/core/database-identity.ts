import { isEntityKind } from './entity-kind.js';
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

/** What a dialect's store accepts: drizzle's database classes, and the clients they run on. */
export interface DrizzleDatabaseKind {
  /** The drizzle modules that make such a database, for the messages, e.g. `node-postgres`. */
  readonly drivers: string;
  /** The entity kinds of drizzle's database classes of the dialect (transactions are subclasses). */
  readonly kinds: readonly string[];
  /** Whether a database's `$client` is a client of one of the drivers. */
  readonly isClient: (client: unknown) => boolean;
}

/**
 * Refuses what is not a drizzle database (or transaction) of a dialect, or one whose `$client` is
 * not a client of its drivers: drizzle 1.0 reads a lone argument, `drizzle(pool)`, as a config
 * object, and a store over what it makes of it would run somewhere the caller never chose.
 *
 * @param db - what the store was given (the primary of a `withReplicas` database)
 * @param kind - the dialect's classes and clients
 * @throws {@link UnrecognisedDatabaseError} when `db` is neither
 */
export function assertDrizzleDatabase(db: unknown, kind: DrizzleDatabaseKind): void {
  if (!kind.kinds.some((name) => isEntityKind(db, name))) {
    throw new UnrecognisedDatabaseError(
      `expected a drizzle database from drizzle-orm/${kind.drivers}, made with drizzle({ client }), got ${describe(db)}`,
    );
  }
  // A transaction has no $client: it runs on its connection, which the database it came from chose.
  if ('$client' in (db as object) && !kind.isClient((db as { $client: unknown }).$client)) {
    throw new UnrecognisedDatabaseError(
      `the drizzle database does not run on a client of drizzle-orm/${kind.drivers}; make it with drizzle({ client })`,
    );
  }
}

/** Whether `value` is an object or a function with a method called `name`. */
export function hasMethod(value: unknown, name: string): boolean {
  return (
    (typeof value === 'object' || typeof value === 'function') &&
    value !== null &&
    typeof (value as Record<string, unknown>)[name] === 'function'
  );
}
