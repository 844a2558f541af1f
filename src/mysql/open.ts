import type { Pool } from 'mysql2/promise';
import { assertBackedBy } from '../core/database-identity.js';
import { type DeploymentWarningOptions, enforceDeployment } from '../core/deployment.js';
import { checkedEncryption, type EncryptionOption } from '../core/encryption.js';
import { DatabaseOpenError } from '../core/errors.js';
import { assertIntegerOption } from '../core/validation.js';
import { checkMysqlDeployment } from './deployment.js';
import { applyMysqlMigrations, type MysqlMigrationOptions } from './migrate.js';
import { MysqlIdempotencyStore } from './store.js';

/** Options of {@link openMysqlStore}. */
export interface OpenMysqlStoreOptions
  extends MysqlMigrationOptions,
    DeploymentWarningOptions,
    EncryptionOption {
  /**
   * The most connections of the pool `openMysqlStore` creates from a URL. Default 10. Ignored when
   * you pass your own pool.
   */
  readonly poolSize?: number;
  /**
   * `true` batches the claims, fenced finishes and reads of the requests in flight at the same
   * moment into one statement per kind. Default `false`. See `MysqlStoreOptions.batch`.
   */
  readonly batch?: boolean;
}

// The first versions with FOR UPDATE SKIP LOCKED, which the purge needs.
const MIN_MARIADB = [10, 6];
const MIN_MYSQL = [8, 0];

function unsupported(version: string): string | undefined {
  const [major = 0, minor = 0] = version.split(/[.-]/).map(Number);
  const [needMajor = 0, needMinor = 0] = /mariadb/i.test(version) ? MIN_MARIADB : MIN_MYSQL;
  if (major > needMajor || (major === needMajor && minor >= needMinor)) return undefined;
  const server = /mariadb/i.test(version) ? 'MariaDB' : 'MySQL';
  return `${server} ${version} has no FOR UPDATE SKIP LOCKED: use ${server} ${needMajor}.${needMinor} or later`;
}

// Strict mode turns a value the column cannot hold into an error instead of a silent truncation.
// The store already refuses over-long keys itself; this covers whatever else the session writes.
const STRICT_SESSION =
  "SET SESSION sql_mode = TRIM(BOTH ',' FROM CONCAT(@@SESSION.sql_mode, ',STRICT_ALL_TABLES'))";

/**
 * Opens an idempotency store on MySQL or MariaDB: connects, checks the server can run it and
 * hands what can lose answers to `onDeploymentWarning` (see `checkMysqlDeployment`), applies the
 * migrations under a named lock (so any number of instances can start at once), and
 * returns the store.
 *
 * Given a URL, the store creates a mysql2 pool (utf8mb4, every connection in strict `sql_mode`)
 * and `close()` ends it. Given your own mysql2 promise `Pool`, the store shares it and `close()`
 * leaves it open; it must speak utf8mb4 (mysql2's default charset).
 *
 * @param source - a `mysql://user:password@host:port/database` URL, or a `mysql2/promise` pool
 * @param options - see {@link OpenMysqlStoreOptions}
 * @typeParam T - the type of the stored responses
 * @example
 * ```ts
 * import { openMysqlStore } from 'drizzle-idempotency/mysql';
 *
 * const store = await openMysqlStore<{ receipt: number }>('mysql://root@127.0.0.1:3306/app');
 * try {
 *   await store.reserve('order-42', 'fingerprint', Date.now() / 1000 + 86_400);
 * } finally {
 *   await store.close();
 * }
 * ```
 * @throws {@link InvalidOptionError} for a bad pool size, before connecting
 * @throws {@link DatabaseOpenError} when the server cannot be reached or is too old
 * @throws {@link SchemaMismatchError} when a foreign table is in the way; nothing is written
 */
export async function openMysqlStore<T = unknown>(
  source: string | Pool,
  options: OpenMysqlStoreOptions = {},
): Promise<MysqlIdempotencyStore<T>> {
  const encryption = checkedEncryption(options);
  const connectionLimit = options.poolSize ?? 10;
  assertIntegerOption(connectionLimit, 'poolSize', 1, 10_000);
  if (typeof source === 'string' && source.length === 0) {
    throw new DatabaseOpenError('the connection string must not be empty');
  }
  // Loaded here rather than at the top so that users of the other dialects need not install mysql2.
  const [{ default: mysql }, { drizzle }] = await Promise.all([
    import('mysql2/promise'),
    import('drizzle-orm/mysql2'),
  ]);
  let pool: Pool;
  try {
    pool =
      typeof source === 'string'
        ? mysql.createPool({ uri: source, connectionLimit, charset: 'utf8mb4' })
        : source;
  } catch (error) {
    throw new DatabaseOpenError(
      `cannot use the connection string: ${(error as Error).message}`,
      error,
    );
  }
  const ownsPool = pool !== source;
  if (ownsPool) {
    pool.pool.on('connection', (connection) => {
      // Queries on one connection run in order, so this runs before anything the store sends.
      connection.query(STRICT_SESSION, (error: Error | null) => {
        if (error) connection.destroy();
      });
    });
  }
  try {
    let version: string;
    try {
      const [rows] = (await pool.query('SELECT VERSION() AS version')) as unknown as [
        { version: string }[],
      ];
      version = rows[0]?.version ?? '';
    } catch (error) {
      throw new DatabaseOpenError(
        `cannot reach the MySQL server: ${(error as Error).message}`,
        error,
      );
    }
    const problem = unsupported(version);
    if (problem !== undefined) throw new DatabaseOpenError(problem);
    const db = drizzle({ client: pool });
    assertBackedBy(db, pool, 'mysql2');
    const table = options.table === undefined ? {} : { table: options.table };
    enforceDeployment(await checkMysqlDeployment(db), options);
    await applyMysqlMigrations(db, table);
    return new MysqlIdempotencyStore<T>(db, {
      ...table,
      ...encryption,
      ...(options.batch === undefined ? {} : { batch: options.batch }),
      ...(ownsPool ? { onClose: () => pool.end() } : {}),
    });
  } catch (error) {
    if (ownsPool) await pool.end();
    throw error;
  }
}
