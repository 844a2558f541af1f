import type { Client } from '@libsql/client';
import { assertBackedBy } from '../core/database-identity.js';
import { checkedEncryption, type EncryptionOption } from '../core/encryption.js';
import { DatabaseOpenError, IdempotencyError } from '../core/errors.js';
import { assertIntegerOption } from '../core/validation.js';
import { applyLibsqlMigrations, type LibsqlMigrationOptions } from './migrate.js';
import { LibsqlIdempotencyStore } from './store.js';

/** Options of {@link openLibsqlStore}. */
export interface OpenLibsqlStoreOptions extends LibsqlMigrationOptions, EncryptionOption {
  /**
   * How long a write waits for another connection's write lock before failing, in milliseconds.
   * Default 5000.
   */
  readonly busyTimeoutMs?: number;
  /**
   * The auth token of a remote database (Turso's database token, or the JWT a `sqld` server
   * checks), sent as a bearer token. Only for `libsql:`, `http(s):` and `ws(s):` URLs.
   */
  readonly authToken?: string;
}

const REMOTE = /^(libsql|https?|wss?):\/\//;

// A remote URL as shown in an error: its origin, never a token in its query string.
function shown(url: string): string {
  if (!REMOTE.test(url)) return url;
  try {
    const { protocol, host } = new URL(url);
    return `${protocol}//${host}`;
  } catch {
    return 'the remote database';
  }
}

function errorCode(error: unknown): string | undefined {
  const code = (error as { code?: unknown } | null)?.code;
  return typeof code === 'string' ? code : undefined;
}

function describeFailure(target: string, error: unknown): DatabaseOpenError {
  const url = shown(target);
  const code = errorCode(error);
  if (code === 'SQLITE_NOTADB') {
    return new DatabaseOpenError(`cannot open ${url}: the file is not a SQLite database`, error);
  }
  if (code === 'SQLITE_CORRUPT') {
    return new DatabaseOpenError(`cannot open ${url}: the database file is damaged`, error);
  }
  if (code === 'SQLITE_READONLY') {
    return new DatabaseOpenError(`cannot open ${url} for writing: the file is read-only`, error);
  }
  return new DatabaseOpenError(`cannot open ${url}: ${(error as Error).message}`, error);
}

/**
 * Opens a libSQL database as an idempotency store, then applies the migrations; `close()` closes
 * the client. A local `file:` URL is created if needed and set to the WAL journal, with a busy
 * timeout on every connection of the client. A remote one — Turso (`libsql://…`), or any `sqld`
 * server over `http(s)://` or `ws(s)://` — is opened with `options.authToken`; its server owns
 * the journal, so no PRAGMA is sent to it, and the store's sweep leaves the WAL checkpoint to it
 * (Turso refuses `PRAGMA wal_checkpoint`).
 *
 * `options.table` names another keys table (see `sqliteKeysTable`).
 *
 * An in-memory database is refused, because libSQL gives it a single connection that one open
 * transaction would hold.
 *
 * @param url - a `file:` URL, e.g. `file:./idempotency.db` or `file:///var/lib/app/idem.db`, or a
 *   remote one, e.g. `libsql://my-db-my-org.turso.io`
 * @param options - see {@link OpenLibsqlStoreOptions}
 * @typeParam T - the type of the stored responses
 * @example
 * ```ts
 * const store = await openLibsqlStore<{ receipt: number }>('file:./idempotency.db');
 * try {
 *   await store.reserve('order-42', fingerprint, now + 86_400);
 * } finally {
 *   await store.close();
 * }
 * ```
 * @throws {@link DatabaseOpenError} for a URL that is neither a local file nor a remote libSQL
 * one, a missing directory, a file that is not a database, a file that cannot be written, or a
 * remote server that cannot be reached or refuses the token
 * @throws {@link SchemaMismatchError} when a foreign `keys` table is in the way
 */
export async function openLibsqlStore<T = unknown>(
  url: string,
  options: OpenLibsqlStoreOptions = {},
): Promise<LibsqlIdempotencyStore<T>> {
  const encryption = checkedEncryption(options);
  const busyTimeoutMs = options.busyTimeoutMs ?? 5000;
  assertIntegerOption(busyTimeoutMs, 'busyTimeoutMs', 0, 2 ** 31 - 1);
  const table = options.table === undefined ? {} : { table: options.table };
  const remote = typeof url === 'string' && REMOTE.test(url);
  if (typeof url !== 'string' || !(remote || url.startsWith('file:'))) {
    throw new DatabaseOpenError(
      `the database URL must be a local file: URL such as file:./idempotency.db or a libsql:, http(s): or ws(s): URL, got ${typeof url === 'string' ? JSON.stringify(shown(url)) : typeof url}`,
    );
  }
  if (options.authToken !== undefined && typeof options.authToken !== 'string') {
    throw new DatabaseOpenError(`authToken must be a string, got ${typeof options.authToken}`);
  }
  if (/^file::memory:|[?&]mode=memory(&|$)/.test(url)) {
    throw new DatabaseOpenError(
      'an in-memory libSQL database has a single connection: open a file instead',
    );
  }
  // Loaded here rather than at the top, so that importing this entry loads no driver: a Worker or
  // an app that only builds the store over its own client never evaluates the local file driver.
  const [{ createClient }, { drizzle }] = await Promise.all([
    import('@libsql/client'),
    import('drizzle-orm/libsql'),
  ]);
  let client: Client;
  try {
    client = remote
      ? createClient({
          url,
          ...(options.authToken === undefined ? {} : { authToken: options.authToken }),
        })
      : createClient({ url, timeout: busyTimeoutMs });
  } catch (error) {
    throw describeFailure(url, error);
  }
  try {
    // Read before writing anything: this is where a file that is not a database fails.
    await client.execute('SELECT count(*) FROM sqlite_master');
    const db = drizzle({ client });
    assertBackedBy(db, client, 'libsql');
    await applyLibsqlMigrations(db, table);
    // WAL is a property of the file, so setting it once serves every connection of the client.
    if (!remote) await client.execute('PRAGMA journal_mode = WAL');
    return new LibsqlIdempotencyStore<T>(db, {
      onClose: () => client.close(),
      ...table,
      ...encryption,
    });
  } catch (error) {
    client.close();
    if (error instanceof IdempotencyError) throw error;
    throw describeFailure(url, error);
  }
}
