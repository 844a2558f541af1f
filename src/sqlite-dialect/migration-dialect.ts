import type { MigrationFile } from '../core/journal.js';
import type { MigrationPlan, MigrationStatements } from '../core/migrator.js';
import { DEFAULT_TABLE_NAME } from '../core/table-name.js';
import { sqliteMigrations } from '../generated/migrations.js';
import type { SqliteStatement } from './compile.js';

const plain = (sql: string): SqliteStatement => ({ sql, args: [] });

/**
 * The migrator's statements on SQLite, shared by every SQLite driver (better-sqlite3, libSQL, D1,
 * bun:sqlite): each supplies only how they run and its lock.
 */
export const sqliteMigrationStatements: MigrationStatements<SqliteStatement> = {
  quote: '`',
  columns: (table) => plain(`PRAGMA table_info("${table}")`),
  journalRows: (journal) => plain(`SELECT hash, created_at FROM "${journal}"`),
  createJournal: (journal) =>
    plain(
      `CREATE TABLE "${journal}" (id INTEGER PRIMARY KEY, hash text NOT NULL, created_at numeric)`,
    ),
  record: (journal, migration) => ({
    sql: `INSERT INTO "${journal}" ("hash", "created_at") VALUES (?, ?)`,
    args: [migration.hash, migration.folderMillis],
  }),
  migration: plain,
};

/**
 * For the batch-only SQLite drivers: fails when `migration` is already recorded, rolling the
 * batch back. json('x') is malformed JSON, the one way to raise an error from a plain SELECT.
 */
export function sqliteUnrecordedGuard(journal: string, migration: MigrationFile): SqliteStatement {
  return {
    sql: `SELECT CASE WHEN EXISTS (SELECT 1 FROM "${journal}" WHERE created_at = ?) THEN json('x') ELSE 1 END`,
    args: [migration.folderMillis],
  };
}

/**
 * What the SQLite migrator applies for the keys table `table`: every committed migration, or the
 * subset `migrations` (a profile such as the one-shot file functions' five columns).
 */
export function sqliteMigrationPlan(
  table: string = DEFAULT_TABLE_NAME,
  migrations: readonly MigrationFile[] = sqliteMigrations,
): MigrationPlan {
  return { table, migrations, committed: sqliteMigrations };
}
