import type { Client } from '@libsql/client';
import { readMigrationFiles } from 'drizzle-orm/migrator';
import { keysTableProblems } from '../core/adoption.js';
import { SchemaMismatchError } from '../core/errors.js';
import { migrationsFolder } from '../core/migrations-folder.js';
import type { AnyLibsqlDatabase } from './store.js';

const MIGRATIONS_TABLE = '__drizzle_migrations';
const INDEX_NAME = 'keys_status_expires_id_idx';

const EXPECTED_COLUMNS: Record<string, 'TEXT' | 'REAL'> = {
  id: 'TEXT',
  fingerprint: 'TEXT',
  status: 'TEXT',
  response: 'TEXT',
  expires: 'REAL',
};

function affinity(declaredType: string): string {
  const type = declaredType.toUpperCase();
  if (type.includes('INT')) return 'INTEGER';
  if (type.includes('CHAR') || type.includes('CLOB') || type.includes('TEXT')) return 'TEXT';
  if (type.includes('REAL') || type.includes('FLOA') || type.includes('DOUB')) return 'REAL';
  return type === '' ? 'BLOB' : 'NUMERIC';
}

async function assertAdoptable(client: Client): Promise<void> {
  const kind = (await client.execute("SELECT type FROM sqlite_master WHERE name = 'keys'")).rows[0]
    ?.type;
  if (kind !== undefined && kind !== 'table') {
    throw new SchemaMismatchError(
      `keys is a ${String(kind)}, not a table: it cannot be used as an idempotency store`,
    );
  }
  const columns = (await client.execute('PRAGMA table_info(keys)')).rows;
  if (columns.length > 0) {
    const problems = keysTableProblems(
      columns.map((column) => ({
        name: String(column.name),
        type: affinity(String(column.type)),
        primary: Number(column.pk) > 0,
      })),
      EXPECTED_COLUMNS,
    );
    if (problems.length > 0) {
      throw new SchemaMismatchError(
        `the existing keys table cannot be used as an idempotency store: ${problems.join('; ')}`,
      );
    }
  }
  const bookkeeping = (await client.execute(`PRAGMA table_info("${MIGRATIONS_TABLE}")`)).rows.map(
    (column) => String(column.name),
  );
  if (
    bookkeeping.length > 0 &&
    !(bookkeeping.includes('hash') && bookkeeping.includes('created_at'))
  ) {
    throw new SchemaMismatchError(
      `the existing ${MIGRATIONS_TABLE} table is not drizzle's: it has no hash and created_at columns`,
    );
  }
  const owner = (
    await client.execute({
      sql: "SELECT tbl_name FROM sqlite_master WHERE type = 'index' AND name = ?",
      args: [INDEX_NAME],
    })
  ).rows[0]?.tbl_name;
  if (owner !== undefined && owner !== 'keys') {
    throw new SchemaMismatchError(
      `the index name ${INDEX_NAME} is already used by the table ${String(owner)}`,
    );
  }
}

/**
 * Applies the committed SQLite migrations (the same files as `applySqliteMigrations`) through a
 * libSQL client. Idempotent: an up-to-date database is only read. A `keys` table created by hand
 * with the contract's columns is adopted; any other `keys` table is refused before anything is
 * written.
 *
 * Safe when several processes initialise one file at once: the pending migrations are applied in
 * one `write` transaction (`BEGIN IMMEDIATE`), and what is pending is decided only once the write
 * lock is held, so the losers find the work done. The transaction stays open across awaits: run
 * it before the client serves other operations.
 *
 * @example
 * ```ts
 * import { createClient } from '@libsql/client';
 * import { drizzle } from 'drizzle-orm/libsql';
 * import { applyLibsqlMigrations } from 'drizzle-idempotency/libsql';
 *
 * await applyLibsqlMigrations(drizzle(createClient({ url: 'file:app.db' })));
 * ```
 * @throws {@link SchemaMismatchError} when a foreign `keys` table is in the way
 */
export async function applyLibsqlMigrations(db: AnyLibsqlDatabase): Promise<void> {
  const client = db.$client;
  await assertAdoptable(client);
  const migrations = readMigrationFiles({ migrationsFolder: migrationsFolder('sqlite') });
  const newest = Math.max(...migrations.map((migration) => migration.folderMillis));
  const lastApplied = async (run: Pick<Client, 'execute'>): Promise<number> => {
    const table = await run.execute({
      sql: "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?",
      args: [MIGRATIONS_TABLE],
    });
    if (table.rows.length === 0) return Number.NEGATIVE_INFINITY;
    const last = (await run.execute(`SELECT max(created_at) AS last FROM "${MIGRATIONS_TABLE}"`))
      .rows[0]?.last;
    return last == null ? Number.NEGATIVE_INFINITY : Number(last);
  };
  if ((await lastApplied(client)) >= newest) return;
  const tx = await client.transaction('write');
  try {
    await tx.execute(
      `CREATE TABLE IF NOT EXISTS "${MIGRATIONS_TABLE}" (id SERIAL PRIMARY KEY, hash text NOT NULL, created_at numeric)`,
    );
    const last = await lastApplied(tx);
    for (const migration of migrations) {
      if (migration.folderMillis <= last) continue;
      for (const statement of migration.sql) await tx.execute(statement);
      await tx.execute({
        sql: `INSERT INTO "${MIGRATIONS_TABLE}" ("hash", "created_at") VALUES (?, ?)`,
        args: [migration.hash, migration.folderMillis],
      });
    }
    await tx.commit();
  } finally {
    tx.close();
  }
}
