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
import { sqliteMigrations } from '../generated/migrations.js';
import type { SqliteQuery } from '../libsql/migrate.js';
import type { SqliteColumnInfo } from './migrate.js';

/** A statement of a migration batch: its text and its arguments in order. */
export interface MigrationStatement {
  readonly sql: string;
  readonly args: readonly unknown[];
}

async function journalRows(query: SqliteQuery, table: string): Promise<JournalRow[]> {
  const names = (await query<SqliteColumnInfo>(`PRAGMA table_info("${table}")`)).map(
    (column) => column.name,
  );
  if (!(names.includes('hash') && names.includes('created_at'))) return [];
  return query<JournalRow>(`SELECT hash, created_at FROM "${table}"`);
}

// A statement that fails, rolling the whole batch back, when the migration is already recorded:
// two Workers that both found it pending cannot both apply it. json('x') is malformed JSON, the
// one way to raise an error from a plain SELECT in SQLite.
function unrecordedGuard(journal: string, when: number): MigrationStatement {
  return {
    sql: `SELECT CASE WHEN EXISTS (SELECT 1 FROM "${journal}" WHERE created_at = ?) THEN json('x') ELSE 1 END`,
    args: [when],
  };
}

/**
 * The statements that bring a SQLite database up to date, to run as one atomic batch or
 * transaction on drivers without an interactive one (D1) or whose transactions cannot span an
 * await (bun:sqlite): the library's journal, 0.1.0's record carried over, then each pending
 * migration guarded, applied and recorded. `undefined` when nothing is pending. The guard of a
 * migration fails when it is already recorded, so of two runs that both found it pending, the
 * second rolls back whole; run this again then, and it answers `undefined`.
 *
 * @param query - runs one read on the database
 * @param name - the keys table's name
 */
export async function sqliteMigrationBatch(
  query: SqliteQuery,
  name: string,
): Promise<MigrationStatement[] | undefined> {
  const journal = migrationsTableName(name);
  const journalExists = (await query(`PRAGMA table_info("${journal}")`)).length > 0;
  const pending = pendingMigrations(sqliteMigrations, await journalRows(query, journal));
  if (pending.length === 0) return undefined;
  const record = (hash: string, when: number): MigrationStatement => ({
    sql: `INSERT INTO "${journal}" ("hash", "created_at") VALUES (?, ?)`,
    args: [hash, when],
  });
  const batch: MigrationStatement[] = [
    {
      sql: `CREATE TABLE IF NOT EXISTS "${journal}" (id INTEGER PRIMARY KEY, hash text NOT NULL, created_at numeric)`,
      args: [],
    },
  ];
  // 0.1.0 only ever made the default table, so only its journal has records to carry over.
  const carried =
    !journalExists && name === DEFAULT_TABLE_NAME
      ? legacyJournalRows(sqliteMigrations, await journalRows(query, LEGACY_MIGRATIONS_TABLE))
      : [];
  for (const migration of carried) batch.push(record(migration.hash, migration.folderMillis));
  // The columns as they are before the batch: a table made by the app's own drizzle-kit
  // migrations already has the later columns, and adding one twice would fail the batch.
  const columns = new Map<string, string[]>();
  const columnsOf = async (table: string) => {
    if (!columns.has(table)) {
      const info = await query<SqliteColumnInfo>(`PRAGMA table_info("${table}")`);
      columns.set(
        table,
        info.map((column) => column.name),
      );
    }
    return columns.get(table) ?? [];
  };
  const recorded = carried.map((migration) => ({
    hash: migration.hash,
    created_at: migration.folderMillis,
  }));
  for (const migration of pendingMigrations(pending, recorded)) {
    batch.push(unrecordedGuard(journal, migration.folderMillis));
    for (const statement of migration.sql) {
      const renamed = renameMigrationStatement(statement, name, '`');
      const added = addedColumn(renamed, '`');
      if (added !== undefined && (await columnsOf(added.table)).includes(added.column)) continue;
      batch.push({ sql: renamed, args: [] });
    }
    batch.push(record(migration.hash, migration.folderMillis));
  }
  return batch;
}
