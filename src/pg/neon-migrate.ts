import { type SQL, sql } from 'drizzle-orm';
import type { NeonHttpDatabase } from 'drizzle-orm/neon-http';
import {
  addedColumn,
  type JournalRow,
  legacyJournalRows,
  pendingMigrations,
} from '../core/journal.js';
import {
  DEFAULT_TABLE_NAME,
  LEGACY_MIGRATIONS_TABLE,
  migrationsTableName,
  renameMigrationStatement,
} from '../core/table-name.js';
import { pgMigrations } from '../generated/migrations.js';
import { queryRows } from './client.js';
import { quoteIdentifier } from './identifier.js';
import { assertAdoptablePgKeysTable, type PgMigrationOptions } from './migrate.js';
import { resolvePgTable } from './schema.js';

/** A drizzle database over neon-http (`drizzle({ client: neon(url) })`), whatever its schema. */
// biome-ignore lint/suspicious/noExplicitAny: the store uses its own table, never the app's schema
export type AnyNeonHttpDatabase = NeonHttpDatabase<any>;

type Reader = Pick<AnyNeonHttpDatabase, 'execute'>;

async function journalRows(
  db: Reader,
  schema: string,
  journal: string,
): Promise<JournalRow[] | undefined> {
  const table = `${quoteIdentifier(schema)}.${quoteIdentifier(journal)}`;
  const [exists] = await queryRows<{ found: boolean }>(
    db,
    sql`SELECT to_regclass(${table}) IS NOT NULL AS found`,
  );
  if (!exists?.found) return undefined;
  return queryRows<JournalRow>(db, sql.raw(`SELECT hash, created_at FROM ${table}`));
}

async function hasColumn(db: Reader, schema: string, table: string, column: string) {
  const rows = await queryRows<{ found: boolean }>(
    db,
    sql`SELECT EXISTS (SELECT 1 FROM information_schema.columns
          WHERE table_schema = ${schema} AND table_name = ${table} AND column_name = ${column}) AS found`,
  );
  return rows[0]?.found === true;
}

// The statements that bring the schema up to date, or `undefined` when it is: read first, then
// sent as one batch. Each migration is recorded in the journal before its statements, and the
// journal's primary key is its `created_at`, so a batch that lost a race to another instance
// fails on that insert and rolls back whole.
async function migrationBatch(
  db: AnyNeonHttpDatabase,
  options: PgMigrationOptions,
): Promise<SQL[] | undefined> {
  const { name, schema } = resolvePgTable(options);
  const journal = migrationsTableName(name);
  const quoted = quoteIdentifier(schema);
  const journalTable = `${quoted}.${quoteIdentifier(journal)}`;
  const applied = await journalRows(db, schema, journal);
  const serialId = applied !== undefined && (await hasColumn(db, schema, journal, 'id'));
  const pending = pendingMigrations(pgMigrations, applied ?? []);
  if (applied !== undefined && pending.length === 0 && !serialId) return undefined;
  await assertAdoptablePgKeysTable(db, options);
  const [found] = await queryRows<{ found: boolean }>(
    db,
    sql`SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = ${schema}) AS found`,
  );
  const record = (hash: string, createdAt: number) =>
    sql`INSERT INTO ${sql.raw(journalTable)} (hash, created_at) VALUES (${hash}, ${createdAt})`;
  // The key applyPgMigrations locks too, so migrators over neon-http and over a TCP driver queue
  // behind each other.
  const batch: SQL[] = [
    sql`SELECT pg_advisory_xact_lock(hashtextextended(${`drizzle-idempotency migrations ${schema}`}, 0))`,
  ];
  // CREATE SCHEMA needs the CREATE privilege on the database even with IF NOT EXISTS, so only a
  // schema found missing is created.
  if (!found?.found) batch.push(sql.raw(`CREATE SCHEMA IF NOT EXISTS ${quoted}`));
  batch.push(sql.raw(`SET LOCAL search_path TO ${quoted}`));
  if (serialId) {
    batch.push(sql.raw(`ALTER TABLE ${journalTable} DROP COLUMN id`));
    batch.push(sql.raw(`ALTER TABLE ${journalTable} ADD PRIMARY KEY (created_at)`));
  }
  let recorded = applied ?? [];
  if (applied === undefined) {
    batch.push(
      sql.raw(
        `CREATE TABLE ${journalTable} (hash text NOT NULL, created_at bigint PRIMARY KEY NOT NULL)`,
      ),
    );
    const legacy =
      name === DEFAULT_TABLE_NAME
        ? ((await journalRows(db, schema, LEGACY_MIGRATIONS_TABLE)) ?? [])
        : [];
    const carried = legacyJournalRows(pgMigrations, legacy);
    for (const migration of carried) batch.push(record(migration.hash, migration.folderMillis));
    recorded = carried.map((migration) => ({
      hash: migration.hash,
      created_at: migration.folderMillis,
    }));
  }
  for (const migration of pendingMigrations(pgMigrations, recorded)) {
    batch.push(record(migration.hash, migration.folderMillis));
    for (const statement of migration.sql) {
      const renamed = renameMigrationStatement(statement, name, '"');
      const added = addedColumn(renamed, '"');
      if (added !== undefined && (await hasColumn(db, schema, added.table, added.column))) {
        continue;
      }
      batch.push(sql.raw(renamed));
    }
  }
  return batch;
}

/**
 * Applies the committed PostgreSQL migrations over neon-http (`drizzle({ client: neon(url) })` from
 * `drizzle-orm/neon-http`), which has no interactive transaction: the same SQL, journal, table
 * naming and adoption rules as {@link applyPgMigrations}, sent as one `db.batch([...])`, which
 * Neon runs as one transaction. Idempotent: an up-to-date schema is only read, so a function may
 * call it on every cold start.
 *
 * What is pending is read before the batch; the batch then takes the same
 * `pg_advisory_xact_lock` as `applyPgMigrations` and records each migration in the journal before
 * running it. When several instances migrate at once, the journal's primary key refuses the
 * losers' records, their batches roll back whole, and they find the work done.
 *
 * @example
 * ```ts
 * import { neon } from '@neondatabase/serverless';
 * import { drizzle } from 'drizzle-orm/neon-http';
 * import { applyNeonHttpMigrations } from 'drizzle-idempotency/pg';
 *
 * await applyNeonHttpMigrations(drizzle({ client: neon(process.env.DATABASE_URL ?? '') }));
 * ```
 * @throws {@link InvalidOptionError} for a schema name PostgreSQL cannot hold
 * @throws {@link SchemaMismatchError} when a foreign table of that name is in the way
 */
export async function applyNeonHttpMigrations(
  db: AnyNeonHttpDatabase,
  options: PgMigrationOptions = {},
): Promise<void> {
  const batch = await migrationBatch(db, options);
  if (batch === undefined) return;
  const [first, ...rest] = batch.map((statement) => db.execute(statement));
  if (first === undefined) return;
  try {
    await db.batch([first, ...rest]);
  } catch (error) {
    // Another instance may have applied the same migrations first: then nothing is left to do.
    if ((await migrationBatch(db, options)) === undefined) return;
    throw error;
  }
}
