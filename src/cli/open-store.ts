import { existsSync } from 'node:fs';
import { DatabaseOpenError } from '../core/errors.js';
import type { IdempotencyStore } from '../core/store.js';
import { openSqliteStore } from '../sqlite/open.js';

/** The options every command takes to find its database. */
export interface StoreLocation {
  /** The SQLite file: `--db`, else `IDEM_DB`, else `./idempotency.db`. */
  readonly db: string;
}

/**
 * Opens the store a command works on. Only `migrate` creates a missing file: any other command
 * on a mistyped path would otherwise report an empty new database as if all were well.
 *
 * @param location - the parsed global options
 * @param create - whether a missing database may be created
 * @throws {@link DatabaseOpenError} when the file is missing (and may not be created), in a
 * missing directory, or not a database
 */
export function openCliStore(location: StoreLocation, create: boolean): IdempotencyStore {
  if (!create && location.db !== ':memory:' && !existsSync(location.db)) {
    throw new DatabaseOpenError(
      `no database at ${location.db}: create it with "idem migrate --db ${location.db}"`,
    );
  }
  return openSqliteStore(location.db);
}

/**
 * Runs `use` on the store of `location` and closes it afterwards, whatever happens.
 *
 * @param create - whether a missing database may be created (only `migrate`)
 */
export async function withStore<R>(
  location: StoreLocation,
  create: boolean,
  use: (store: IdempotencyStore) => Promise<R>,
): Promise<R> {
  const store = openCliStore(location, create);
  try {
    return await use(store);
  } finally {
    await store.close();
  }
}
