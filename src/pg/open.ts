import type { Pool } from 'pg';
import { assertBackedBy } from '../core/database-identity.js';
import { type DeploymentWarningOptions, enforceDeployment } from '../core/deployment.js';
import { checkedEncryption, type EncryptionOption } from '../core/encryption.js';
import { DatabaseOpenError } from '../core/errors.js';
import { assertIntegerOption } from '../core/validation.js';
import { checkPgDeployment } from './deployment.js';
import { applyPgMigrations, type PgMigrationOptions } from './migrate.js';
import { resolvePgTable } from './schema.js';
import { PgIdempotencyStore } from './store.js';

/** Options of {@link openPgStore}. */
export interface OpenPgStoreOptions
  extends PgMigrationOptions,
    DeploymentWarningOptions,
    EncryptionOption {
  /**
   * The most connections of the pool `openPgStore` creates from a URL. Default 10. Ignored when
   * you pass your own pool.
   */
  readonly poolSize?: number;
  /**
   * `false` sends unnamed statements, for a transaction pooler (PgBouncer in transaction mode,
   * Supabase's and Neon's pooled endpoints). Default `true`. See `PgStoreOptions.prepare`.
   */
  readonly prepare?: boolean;
  /**
   * `true` batches the claims, fenced finishes and reads of the requests in flight at the same
   * moment into one statement per kind. Default `false`. See `PgStoreOptions.batch`.
   */
  readonly batch?: boolean;
}

/**
 * Opens an idempotency store on PostgreSQL: connects, checks the deployment (see
 * `checkPgDeployment`: an UNLOGGED keys table is refused, risky settings are handed to
 * `onDeploymentWarning`), applies the migrations under an advisory lock (so any number of
 * instances can start at once), and returns the store.
 *
 * Given a URL, the store creates a node-postgres `Pool` and `close()` ends it. Given your own
 * `Pool`, the store shares it and `close()` leaves it open. For PGlite or any other drizzle
 * database, use `applyPgMigrations` and `new PgIdempotencyStore(db)`.
 *
 * @param source - a `postgres://` connection string, or a node-postgres `Pool`
 * @param options - see {@link OpenPgStoreOptions}
 * @typeParam T - the type of the stored responses
 * @example
 * ```ts
 * const store = await openPgStore<{ receipt: number }>(process.env.DATABASE_URL!, {
 *   schema: 'idempotency',
 * });
 * try {
 *   await store.reserve('order-42', fingerprint, now + 86_400);
 * } finally {
 *   await store.close();
 * }
 * ```
 * @throws {@link InvalidOptionError} for a bad schema name or pool size, before connecting
 * @throws {@link DatabaseOpenError} when the server cannot be reached
 * @throws {@link SchemaMismatchError} when a foreign `keys` table is in the way; nothing is written
 * @throws {@link DeploymentRefusedError} when the keys table is UNLOGGED; nothing is written
 */
export async function openPgStore<T = unknown>(
  source: string | Pool,
  options: OpenPgStoreOptions = {},
): Promise<PgIdempotencyStore<T>> {
  const encryption = checkedEncryption(options);
  const { table } = resolvePgTable(options);
  const max = options.poolSize ?? 10;
  assertIntegerOption(max, 'poolSize', 1, 10_000);
  if (typeof source === 'string' && source.length === 0) {
    throw new DatabaseOpenError('the connection string must not be empty');
  }
  // Loaded here rather than at the top so that PGlite users need not install `pg`.
  const [{ default: pg }, { drizzle }] = await Promise.all([
    import('pg'),
    import('drizzle-orm/node-postgres'),
  ]);
  let pool: Pool;
  try {
    pool = typeof source === 'string' ? new pg.Pool({ connectionString: source, max }) : source;
  } catch (error) {
    throw new DatabaseOpenError(
      `cannot use the connection string: ${(error as Error).message}`,
      error,
    );
  }
  const ownsPool = pool !== source;
  // An idle client whose connection breaks (a server restart) makes the pool emit `error`; the
  // pool already discards that client and the next query opens a new one. Without a listener
  // Node would treat the event as an uncaught exception and end the process.
  if (ownsPool) pool.on('error', () => undefined);
  try {
    try {
      await pool.query('SELECT 1');
    } catch (error) {
      throw new DatabaseOpenError(
        `cannot reach the PostgreSQL server: ${(error as Error).message}`,
        error,
      );
    }
    const db = drizzle({ client: pool });
    assertBackedBy(db, pool, 'node-postgres');
    const prepare = options.prepare ?? true;
    // Before the migrations, so a refused table is left exactly as it was.
    enforceDeployment(await checkPgDeployment(db, { table, prepare }), options);
    await applyPgMigrations(db, { table });
    return new PgIdempotencyStore<T>(db, {
      table,
      prepare,
      ...(options.batch === undefined ? {} : { batch: options.batch }),
      ...encryption,
      ...(ownsPool ? { onClose: () => pool.end() } : {}),
    });
  } catch (error) {
    if (ownsPool) await pool.end();
    throw error;
  }
}
