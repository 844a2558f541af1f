import { sql } from 'drizzle-orm';
import {
  bigint,
  index,
  type PgTableFn,
  type PgTableWithColumns,
  pgSchema,
  pgTable,
  text,
} from 'drizzle-orm/pg-core';
import type { ColumnFacts } from '../core/drizzle-types.js';
import {
  assertTableName,
  DEFAULT_TABLE_NAME,
  doneIdIndexName,
  migrationsTableName,
  retentionIndexName,
} from '../core/table-name.js';
import { assertSchemaName } from './identifier.js';
import {
  assertPgTablePlace,
  DEFAULT_PG_SCHEMA,
  type PgColumnOf,
  type PgKeysDataColumns,
  type PgKeysTableSchemaOptions,
  pgKeysColumns,
} from './schema.js';

type PgPushTable<Columns extends Record<string, PgColumnOf<ColumnFacts>>> = PgTableWithColumns<{
  name: string;
  schema: string | undefined;
  columns: Columns;
  dialect: 'pg';
  isAlias: false;
}>;

/** What {@link pgPushTables} returns: the keys table as push reads it, and its journal. */
export interface PgPushTables {
  /** The keys table, `id` declared as plain `text`. */
  readonly keys: PgPushTable<
    PgKeysDataColumns & {
      id: PgColumnOf<{
        name: 'id';
        dataType: 'string';
        columnType: 'PgText';
        data: string;
        driverParam: string;
        notNull: true;
        hasDefault: false;
        isPrimaryKey: true;
        enumValues: [string, ...string[]];
      }>;
    }
  >;
  /** The library's migrations journal of that table. */
  readonly journal: PgPushTable<{
    hash: PgColumnOf<{
      name: 'hash';
      dataType: 'string';
      columnType: 'PgText';
      data: string;
      driverParam: string;
      notNull: true;
      hasDefault: false;
      isPrimaryKey: false;
      enumValues: [string, ...string[]];
    }>;
    createdAt: PgColumnOf<{
      name: 'created_at';
      dataType: 'number';
      columnType: 'PgBigInt53';
      data: number;
      driverParam: string | number;
      notNull: true;
      hasDefault: false;
      isPrimaryKey: true;
      enumValues: undefined;
    }>;
  }>;
}

/**
 * The library's tables on PostgreSQL as `drizzle-kit push` reads them back from a schema the
 * library migrated: the keys table and its migrations journal. Export both from the schema file
 * that `drizzle-kit push` reads, and push finds nothing of ours to change.
 *
 * They differ from {@link pgKeysTable} only where drizzle-kit 0.31 cannot see the database: it
 * reads no column collation, so `id` is declared as plain `text` (declared `text COLLATE "C"`,
 * push would alter the column on every run). The column in the database keeps the byte-order "C"
 * collation the library's migrations gave it. So let the library create its tables first (open
 * the store, or run `applyPgMigrations`) before the first push: a push over an empty schema would
 * create `id` in the database's default collation, which the store then refuses.
 *
 * For `drizzle-kit generate` keep exporting {@link pgKeysTable} (or `keys`), which describes the
 * exact DDL.
 *
 * @param name - the keys table's name, as given to the store; default `keys`
 * @param options - the keys table's schema; default `public`
 * @throws {@link InvalidOptionError} for a name or schema the library cannot use
 * @example
 * ```ts
 * import { pgPushTables } from 'drizzle-idempotency/pg';
 * export const { keys, journal } = pgPushTables();
 * ```
 */
export function pgPushTables(name?: string, options: PgKeysTableSchemaOptions = {}): PgPushTables {
  assertPgTablePlace('pgPushTables', name, options);
  const tableName = name ?? DEFAULT_TABLE_NAME;
  const schema = options.schema ?? DEFAULT_PG_SCHEMA;
  assertTableName(tableName);
  assertSchemaName(schema);
  // drizzle refuses pgSchema('public'), as in pgKeysTable.
  const table = (schema === DEFAULT_PG_SCHEMA ? pgTable : pgSchema(schema).table) as PgTableFn<
    string | undefined
  >;
  const keys = table(tableName, { ...pgKeysColumns(), id: text('id').primaryKey() }, (t) => [
    index(retentionIndexName(tableName)).on(t.status, t.expires, t.id),
    // drizzle-kit's push compares indexes without their WHERE, so the real one is declared.
    index(doneIdIndexName(tableName)).on(t.id, t.expires).where(sql`status = 'done'`),
  ]);
  const journal = table(migrationsTableName(tableName), {
    hash: text('hash').notNull(),
    createdAt: bigint('created_at', { mode: 'number' }).primaryKey(),
  });
  // Written out (see PgPushTables), as the keys table's type is.
  return { keys, journal } as unknown as PgPushTables;
}
