import {
  index,
  integer,
  numeric,
  primaryKey,
  type SQLiteTableWithColumns,
  sqliteTable,
  text,
} from 'drizzle-orm/sqlite-core';
import {
  assertTableName,
  DEFAULT_TABLE_NAME,
  doneIdIndexName,
  migrationsTableName,
  retentionIndexName,
} from '../core/table-name.js';
import { type SqliteColumnOf, type SqliteKeysTable, sqliteKeysColumns } from './schema.js';

/** The migrations journal of a keys table on SQLite, as {@link sqlitePushTables} declares it. */
export type SqliteJournalTable = SQLiteTableWithColumns<{
  name: string;
  schema: undefined;
  columns: {
    id: SqliteColumnOf<
      string,
      {
        name: 'id';
        dataType: 'number';
        columnType: 'SQLiteInteger';
        data: number;
        driverParam: number;
        notNull: false;
        hasDefault: false;
        isPrimaryKey: false;
        enumValues: undefined;
      }
    >;
    hash: SqliteColumnOf<
      string,
      {
        name: 'hash';
        dataType: 'string';
        columnType: 'SQLiteText';
        data: string;
        driverParam: string;
        notNull: true;
        hasDefault: false;
        isPrimaryKey: false;
        enumValues: [string, ...string[]];
      }
    >;
    createdAt: SqliteColumnOf<
      string,
      {
        name: 'created_at';
        dataType: 'string';
        columnType: 'SQLiteNumeric';
        data: string;
        driverParam: string;
        notNull: false;
        hasDefault: false;
        isPrimaryKey: false;
        enumValues: undefined;
      }
    >;
  };
  dialect: 'sqlite';
  isAlias: false;
}>;

/** What {@link sqlitePushTables} returns: the keys table and its migrations journal. */
export interface SqlitePushTables {
  readonly keys: SqliteKeysTable;
  readonly journal: SqliteJournalTable;
}

/**
 * The library's tables on SQLite as `drizzle-kit push` reads them back from a database the
 * library migrated: the keys table and its migrations journal. Export both from the schema file
 * that `drizzle-kit push` reads, and push finds nothing of ours to change.
 *
 * They differ from {@link sqliteKeysTable} only where drizzle-kit 0.31 cannot see the database:
 * it reads no `WHERE` of a partial index, so the done-id index is declared without one (declared
 * with it, push would drop and recreate the index on every run). The index in the database stays
 * partial; the library's migrations made it. So let the library create its tables first (open
 * the store, or run `applySqliteMigrations`) before the first push: a push over an empty database
 * would create the index without its `WHERE`.
 *
 * For `drizzle-kit generate` keep exporting {@link sqliteKeysTable} (or `keys`), which describes
 * the exact DDL. libSQL keeps the same tables: these serve it as well.
 *
 * @param name - the keys table's name, as given to the store; default `keys`
 * @throws {@link InvalidOptionError} for a name the library cannot use
 * @example
 * ```ts
 * import { sqlitePushTables } from 'drizzle-idempotency/sqlite';
 * export const { keys, journal } = sqlitePushTables();
 * ```
 */
export function sqlitePushTables(name: string = DEFAULT_TABLE_NAME): SqlitePushTables {
  assertTableName(name);
  const keys = sqliteTable(name, sqliteKeysColumns(), (table) => [
    index(retentionIndexName(name)).on(table.status, table.expires, table.id),
    index(doneIdIndexName(name)).on(table.id, table.expires),
  ]);
  // `id INTEGER PRIMARY KEY` as the migrator writes it: a nullable rowid alias. A column-level
  // primaryKey() would declare it NOT NULL, and push would rebuild the journal to match.
  const journal = sqliteTable(
    migrationsTableName(name),
    { id: integer('id'), hash: text('hash').notNull(), createdAt: numeric('created_at') },
    (table) => [primaryKey({ columns: [table.id] })],
  );
  // Written out (see SqlitePushTables), as the keys table's type is.
  return { keys, journal } as unknown as SqlitePushTables;
}
