import { sql } from 'drizzle-orm';
import { migrationsTableName, renameMigrationStatement } from '../core/table-name.js';
import { mysqlMigrations } from '../generated/migrations.js';
import { type AnyMysqlDatabase, queryRows } from './client.js';
import { mysqlErrno } from './errors.js';
import { assertAdoptableMysqlKeysTable, type MysqlMigrationOptions } from './migrate.js';
import type { AnyPlanetscaleDatabase } from './planetscale.js';
import { resolveMysqlTable } from './schema.js';

// queryRows and the adoption check read PlanetScale's answers (`rows`) as well as mysql2's.
type Reader = Pick<AnyMysqlDatabase, 'execute'>;
const reader = (db: AnyPlanetscaleDatabase) => db as unknown as Reader;

// Table exists (1050), duplicate column (1060), duplicate key name (1061): a statement another
// instance already ran.
const ALREADY_MADE = new Set([1050, 1060, 1061]);

async function lastApplied(db: AnyPlanetscaleDatabase, journal: string): Promise<number> {
  const [exists] = await queryRows<{ found: number | string }>(
    reader(db),
    sql`SELECT count(*) AS found FROM information_schema.TABLES
        WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = ${journal}`,
  );
  if (Number(exists?.found) === 0) return Number.NEGATIVE_INFINITY;
  const [row] = await queryRows<{ last: string | number | null }>(
    reader(db),
    sql`SELECT max(created_at) AS last FROM ${sql.identifier(journal)}`,
  );
  return row?.last == null ? Number.NEGATIVE_INFINITY : Number(row.last);
}

/**
 * Applies the committed MySQL migrations (the same SQL, journal and table naming as
 * `applyMysqlMigrations`) over PlanetScale's serverless driver, for the keys table
 * `options.table` (default `keys`). Idempotent: an up-to-date database is only read. A keys
 * table made by hand with the store's columns is adopted; any other table of that name is refused
 * before anything is written.
 *
 * Vitess does not serve `GET_LOCK` across the driver's HTTP sessions, so, unlike
 * `applyMysqlMigrations`, instances migrating at once are not queued: each statement is written so
 * that running it twice is harmless (`CREATE … IF NOT EXISTS`, a column or an index that is
 * already there is taken as made), and a migration may then be recorded twice in the journal,
 * which reads only its newest entry. A branch with safe migrations on refuses direct DDL: apply
 * the shipped `drizzle/mysql` SQL through a deploy request instead.
 *
 * @example
 * ```ts
 * import { Client } from '@planetscale/database';
 * import { drizzle } from 'drizzle-orm/planetscale-serverless';
 * import { applyPlanetscaleMigrations } from 'drizzle-idempotency/mysql';
 *
 * await applyPlanetscaleMigrations(drizzle({ client: new Client({ url: process.env.DATABASE_URL ?? '' }) }));
 * ```
 * @throws {@link SchemaMismatchError} when a foreign table is in the way
 */
export async function applyPlanetscaleMigrations(
  db: AnyPlanetscaleDatabase,
  options: MysqlMigrationOptions = {},
): Promise<void> {
  const { name: table } = resolveMysqlTable(options);
  const journal = migrationsTableName(table);
  const last = await lastApplied(db, journal);
  const pending = mysqlMigrations.filter((migration) => migration.folderMillis > last);
  if (pending.length === 0) return;
  await assertAdoptableMysqlKeysTable(reader(db), options);
  await db.execute(
    sql`CREATE TABLE IF NOT EXISTS ${sql.identifier(journal)} (id serial PRIMARY KEY, hash text NOT NULL, created_at bigint)`,
  );
  for (const migration of pending) {
    for (const statement of migration.sql) {
      try {
        await db.execute(sql.raw(renameMigrationStatement(statement, table, '`')));
      } catch (error) {
        const errno = mysqlErrno(error);
        if (errno === undefined || !ALREADY_MADE.has(errno)) throw error;
      }
    }
    await db.execute(
      sql`INSERT INTO ${sql.identifier(journal)} (hash, created_at) VALUES (${migration.hash}, ${migration.folderMillis})`,
    );
  }
}
