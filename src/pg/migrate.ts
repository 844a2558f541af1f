import { type SQL, sql } from 'drizzle-orm';
import { type ColumnType, keysTableProblems } from '../core/adoption.js';
import {
  DeploymentCode,
  type DeploymentFinding,
  DeploymentLevel,
  DeploymentRefusedError,
} from '../core/deployment.js';
import { SchemaMismatchError } from '../core/errors.js';
import {
  type MigrationSession,
  type MigrationStatements,
  type MigrationStatus,
  migrateAsync,
  readMigrationStatus,
} from '../core/migrator.js';
import { DEFAULT_TABLE_NAME } from '../core/table-name.js';
import { pgMigrations } from '../generated/migrations.js';
import { type AnyPgDatabase, queryRows } from './client.js';
import { quoteIdentifier } from './identifier.js';
import { DEFAULT_PG_SCHEMA, type PgTableOptions, resolvePgTable } from './schema.js';

const EXPECTED_COLUMNS: Record<string, string> = {
  id: 'text',
  fingerprint: 'text',
  status: 'text',
  response: 'text',
  expires: 'double precision',
};

// Added by the lease migration: a table from before it lacks them until it runs. The fencing
// token is bigint since the migration 0003_fencing_token_bigint; before it ran, integer.
const LEASE_COLUMNS: Record<string, ColumnType> = {
  lease_until: 'double precision',
  attempt: ['bigint', 'integer'],
  unrecorded: 'boolean',
  // Added by the steps migration.
  steps: 'text',
};

// No serial id, so no sequence: see pgPushTables, which describes this table to drizzle-kit.
const PG_JOURNAL_COLUMNS = 'hash text NOT NULL, created_at bigint PRIMARY KEY NOT NULL';

/** Options of {@link applyPgMigrations} and {@link assertAdoptablePgKeysTable}. */
export type PgMigrationOptions = PgTableOptions;

/**
 * The refusal of a keys table whose `pg_class.relpersistence` is not `p` (permanent): an UNLOGGED
 * table skips the WAL, so a crash empties it and no standby receives it; a temporary one ends with
 * its session. `undefined` for a permanent table.
 *
 * @param schema - the table's schema
 * @param name - the table's name
 * @param persistence - its `relpersistence`
 */
export function keysTablePersistenceFinding(
  schema: string,
  name: string,
  persistence: string,
): DeploymentFinding | undefined {
  if (persistence === 'p') return undefined;
  const table = `${quoteIdentifier(schema)}.${quoteIdentifier(name)}`;
  const kind = persistence === 'u' ? 'UNLOGGED' : 'temporary';
  return {
    level: DeploymentLevel.refuse,
    code: DeploymentCode.unloggedTable,
    message: `the keys table ${table} is ${kind}: PostgreSQL empties it at the first crash${persistence === 'u' ? ' and never sends it to a standby' : ''}, so every stored answer is lost and every retry runs its effect again.`,
    fix:
      persistence === 'u'
        ? `ALTER TABLE ${table} SET LOGGED`
        : `create the keys table as a permanent table (applyPgMigrations or "idem migrate")`,
  };
}

interface ColumnInfo {
  persistence: string;
  name: string;
  type: string;
  collation: string | null;
  primary: boolean;
}

/**
 * Checks, without writing, that an existing keys table is one the store can adopt: exactly the
 * columns of the contract with their types (the lease columns may be missing, on a table from
 * before their migration), `id` in the byte-order "C" collation and as the sole
 * primary key (the primary key is what makes `reserve` atomic), and a permanent table: an UNLOGGED
 * one empties at the first crash.
 *
 * @throws {@link DeploymentRefusedError} for an UNLOGGED or temporary table
 * @throws {@link SchemaMismatchError} naming what differs
 */
export async function assertAdoptablePgKeysTable(
  db: Pick<AnyPgDatabase, 'execute'>,
  options: PgMigrationOptions = {},
): Promise<void> {
  const { name, schema } = resolvePgTable(options);
  const columns = await queryRows<ColumnInfo>(
    db,
    sql`SELECT c.relpersistence::text AS persistence, a.attname AS name, format_type(a.atttypid, a.atttypmod) AS type,
          co.collname AS collation, coalesce(a.attnum = ANY (i.indkey), false) AS "primary"
        FROM pg_attribute a
        JOIN pg_class c ON c.oid = a.attrelid
        JOIN pg_namespace n ON n.oid = c.relnamespace
        LEFT JOIN pg_collation co ON co.oid = a.attcollation
        LEFT JOIN pg_index i ON i.indrelid = c.oid AND i.indisprimary
        WHERE n.nspname = ${schema} AND c.relname = ${name} AND a.attnum > 0 AND NOT a.attisdropped
        ORDER BY a.attnum`,
  );
  const [first] = columns;
  if (first === undefined) {
    await assertNotSchemaReading(db, schema, name);
    return;
  }
  const persistence = keysTablePersistenceFinding(schema, name, first.persistence);
  if (persistence !== undefined) throw new DeploymentRefusedError([persistence]);
  const problems = keysTableProblems(columns, EXPECTED_COLUMNS, LEASE_COLUMNS);
  const id = columns.find((column) => column.name === 'id');
  if (id && id.type === 'text' && id.collation !== 'C') {
    problems.push(
      `column id uses the collation ${id.collation ?? 'none'}, expected "C" (byte order): ALTER TABLE ${name} ALTER COLUMN id TYPE text COLLATE "C"`,
    );
  }
  if (problems.length > 0) {
    throw new SchemaMismatchError(
      `the existing ${schema}.${name} table cannot be used as an idempotency store: ${problems.join('; ')}`,
    );
  }
}

// In 0.1.0 a string given to `pgKeysTable` named the schema; now it names the table. An app
// that kept `pgKeysTable('billing')` would get a new, empty `public.billing` beside its keys in
// `billing.keys`, and every key in flight there would run again: refused before anything is made.
async function assertNotSchemaReading(
  db: Pick<AnyPgDatabase, 'execute'>,
  schema: string,
  name: string,
): Promise<void> {
  if (schema !== DEFAULT_PG_SCHEMA || name === DEFAULT_TABLE_NAME) return;
  const [found] = await queryRows<{ found: boolean }>(
    db,
    sql`SELECT EXISTS (SELECT 1 FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
          WHERE n.nspname = ${name} AND c.relname = ${DEFAULT_TABLE_NAME} AND c.relkind IN ('r', 'p')) AS found`,
  );
  if (found?.found) {
    throw new SchemaMismatchError(
      `there is no table ${schema}.${name}, but the schema ${name} holds a keys table: pgKeysTable('${name}') now names the table, not the schema (as it did in 0.1.0). For the keys in ${name}.keys use pgKeysTable('keys', { schema: '${name}' }); to start a new table ${schema}.${name}, create it first`,
    );
  }
}

/**
 * The migrator's statements on PostgreSQL, for the store's schema `schema`: every journal is
 * qualified with it, and the committed SQL (which names no schema) runs with it on the
 * `search_path`. Shared by every PostgreSQL driver, interactive or batch-only; each supplies only
 * how statements run and its lock.
 *
 * @param schema - the store's schema
 */
function pgMigrationStatements(schema: string): MigrationStatements<SQL> {
  const qualified = (table: string) => `${quoteIdentifier(schema)}.${quoteIdentifier(table)}`;
  return {
    quote: '"',
    columns: (table) =>
      sql`SELECT column_name AS name FROM information_schema.columns
          WHERE table_schema = ${schema} AND table_name = ${table} ORDER BY ordinal_position`,
    journalRows: (journal) => sql.raw(`SELECT hash, created_at FROM ${qualified(journal)}`),
    createJournal: (journal) =>
      sql.raw(`CREATE TABLE ${qualified(journal)} (${PG_JOURNAL_COLUMNS})`),
    record: (journal, migration) =>
      sql`INSERT INTO ${sql.raw(qualified(journal))} (hash, created_at) VALUES (${migration.hash}, ${migration.folderMillis})`,
    migration: (statement) => sql.raw(statement),
    // Journals made by earlier versions had `id serial`: drizzle-kit push sees its sequence even
    // when a tablesFilter leaves the journal out, and fails dropping it. Dropping the column drops
    // the sequence it owns; a migration is recorded once, so its `created_at` is the key.
    upgradeJournal: (journal, columns) =>
      columns.includes('id')
        ? [
            sql.raw(`ALTER TABLE ${qualified(journal)} DROP COLUMN id`),
            sql.raw(`ALTER TABLE ${qualified(journal)} ADD PRIMARY KEY (created_at)`),
          ]
        : [],
  };
}

/** A drizzle PostgreSQL database or transaction as the migrator's session. */
function sessionOf(db: Pick<AnyPgDatabase, 'execute'>): MigrationSession<SQL, false> {
  return {
    rows: (statement) => queryRows<object>(db, statement),
    exec: async (statement) => {
      await db.execute(statement);
    },
  };
}

/**
 * Applies the committed drizzle-kit migrations to a PostgreSQL database, for the keys table of
 * `options` (default `keys` in `public`; the migrations are rewritten for another name), creating
 * the schema if missing. Idempotent: an up-to-date schema is only read. A keys table made by hand
 * with the contract's columns is adopted (its rows stay, the index is added); any other table of
 * that name is refused before anything is written. Works on node-postgres, postgres-js and PGlite.
 *
 * The migrations are recorded in the library's own journal in the store's schema,
 * `__idempotency_migrations` (or `__idempotency_migrations_<table>`), never in drizzle's
 * `__drizzle_migrations`, so the application's migrator and this one run in either order, wherever
 * the application keeps its journal. A schema made by drizzle-idempotency 0.1.0, which recorded its
 * migration in `<schema>.__drizzle_migrations`, has that record copied once into the library's
 * journal; the application's rows are left as they are.
 *
 * The committed SQL names no schema: it runs with `SET LOCAL search_path` pointing at the
 * store's schema, so one set of migration files serves every schema.
 *
 * Safe when many instances start at once: drizzle's migrator is not (concurrent runs fail), so
 * the pending migrations are applied in one transaction that first takes a transaction-level
 * `pg_advisory_xact_lock` keyed by the schema, held on that transaction's one connection. Each
 * instance decides what is pending only once it holds the lock, so the others find the work done.
 *
 * @example
 * ```ts
 * const db = drizzle({ client: new Pool({ connectionString: process.env.DATABASE_URL }) });
 * await applyPgMigrations(db, { schema: 'idempotency' });
 * ```
 * @throws {@link InvalidOptionError} for a schema name PostgreSQL cannot hold
 * @throws {@link SchemaMismatchError} when a foreign table of that name is in the way
 */
export async function applyPgMigrations(
  db: AnyPgDatabase,
  options: PgMigrationOptions = {},
): Promise<void> {
  const { name, schema } = resolvePgTable(options);
  const quoted = quoteIdentifier(schema);
  await migrateAsync(
    {
      ...pgMigrationStatements(schema),
      session: sessionOf(db),
      locked: (run) =>
        db.transaction(async (tx) => {
          await tx.execute(
            sql`SELECT pg_advisory_xact_lock(hashtextextended(${`drizzle-idempotency migrations ${schema}`}, 0))`,
          );
          await assertAdoptablePgKeysTable(tx, options);
          // CREATE SCHEMA IF NOT EXISTS still needs the CREATE privilege on the database, so an
          // existing schema is looked up first and only a missing one is created.
          const [found] = await queryRows<{ found: boolean }>(
            tx,
            sql`SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = ${schema}) AS found`,
          );
          if (!found?.found) await tx.execute(sql.raw(`CREATE SCHEMA ${quoted}`));
          await tx.execute(sql.raw(`SET LOCAL search_path TO ${quoted}`));
          await run(sessionOf(tx));
        }),
    },
    { table: name, migrations: pgMigrations, committed: pgMigrations },
  );
}

/**
 * Tells, without writing, whether the keys table exists and which of the library's migrations
 * {@link applyPgMigrations} would apply, by the migrator's own decision (its journal in the
 * store's schema, the records 0.1.0 left in drizzle's, the columns already there). A table made
 * by the application's own drizzle-kit migrations has no missing columns: only the journal is
 * behind, and the first migration run records it.
 *
 * @example
 * ```ts
 * const db = drizzle({ client: new Pool({ connectionString: process.env.DATABASE_URL }) });
 * const { table, pending } = await pgMigrationStatus(db);
 * ```
 * @param db - a drizzle PostgreSQL database (node-postgres, postgres-js, PGlite)
 * @param options - the keys table, when not the default
 * @throws {@link SchemaMismatchError} when a foreign table of that name is in the way
 */
export async function pgMigrationStatus(
  db: Pick<AnyPgDatabase, 'execute'>,
  options: PgMigrationOptions = {},
): Promise<MigrationStatus> {
  const { name, schema } = resolvePgTable(options);
  await assertAdoptablePgKeysTable(db, options);
  return readMigrationStatus(
    pgMigrationStatements(schema),
    { table: name, migrations: pgMigrations, committed: pgMigrations },
    sessionOf(db),
  );
}
