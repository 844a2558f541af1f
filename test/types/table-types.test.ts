// The keys tables' types are written out by hand (so the published declarations typecheck under
// drizzle-orm 0.45 and 1.0 alike), not inferred from the column builders. These checks pin them
// to what drizzle infers from the very builders the tables are made of: the rows read and
// written, checked by the compiler (`npm run typecheck`), and the columns, checked at run time.
import { getTableColumns, getTableName } from 'drizzle-orm';
import { mysqlTable } from 'drizzle-orm/mysql-core';
import { pgTable, text } from 'drizzle-orm/pg-core';
import { sqliteTable } from 'drizzle-orm/sqlite-core';
import { describe, expect, expectTypeOf, it } from 'vitest';
import { type MysqlKeysTable, mysqlKeysColumns, mysqlKeysTable } from '../../src/mysql/schema.js';
import { pgPushTables } from '../../src/pg/push.js';
import { type PgKeysTable, pgKeysColumns, pgKeysTable } from '../../src/pg/schema.js';
import { sqlitePushTables } from '../../src/sqlite-dialect/push.js';
import {
  type SqliteKeysTable,
  sqliteKeysColumns,
  sqliteKeysTable,
} from '../../src/sqlite-dialect/schema.js';

const builtSqlite = sqliteTable('keys', sqliteKeysColumns());
const builtPg = pgTable('keys', pgKeysColumns());
const builtPgPush = pgTable('keys', { ...pgKeysColumns(), id: text('id').primaryKey() });
const builtMysql = mysqlTable('keys', mysqlKeysColumns());

function columnNames(table: Parameters<typeof getTableColumns>[0]): Record<string, string> {
  return Object.fromEntries(
    Object.entries(getTableColumns(table)).map(([key, column]) => [key, column.name]),
  );
}

describe('the written-out types of the keys tables', () => {
  it('read and write the rows drizzle infers from the columns', () => {
    expectTypeOf<SqliteKeysTable['$inferSelect']>().toEqualTypeOf<
      typeof builtSqlite.$inferSelect
    >();
    expectTypeOf<SqliteKeysTable['$inferInsert']>().toEqualTypeOf<
      typeof builtSqlite.$inferInsert
    >();
    expectTypeOf<PgKeysTable['$inferSelect']>().toEqualTypeOf<typeof builtPg.$inferSelect>();
    expectTypeOf<PgKeysTable['$inferInsert']>().toEqualTypeOf<typeof builtPg.$inferInsert>();
    type PgPushKeys = ReturnType<typeof pgPushTables>['keys'];
    expectTypeOf<PgPushKeys['$inferSelect']>().toEqualTypeOf<typeof builtPgPush.$inferSelect>();
    expectTypeOf<PgPushKeys['$inferInsert']>().toEqualTypeOf<typeof builtPgPush.$inferInsert>();
    expectTypeOf<MysqlKeysTable['$inferSelect']>().toEqualTypeOf<typeof builtMysql.$inferSelect>();
    expectTypeOf<MysqlKeysTable['$inferInsert']>().toEqualTypeOf<typeof builtMysql.$inferInsert>();
    // A table's name is in its type, as drizzle's own builder puts it there.
    const renamedSqlite = sqliteKeysTable('idem_keys');
    const renamedMysql = mysqlKeysTable('idem_keys');
    expectTypeOf<(typeof renamedSqlite)['_']['name']>().toEqualTypeOf<'idem_keys'>();
    expectTypeOf<(typeof renamedMysql)['_']['name']>().toEqualTypeOf<'idem_keys'>();
    expect([getTableName(renamedSqlite), getTableName(renamedMysql)]).toEqual([
      'idem_keys',
      'idem_keys',
    ]);
  });

  it('name the columns the tables are built with', () => {
    expect(columnNames(sqliteKeysTable())).toEqual(columnNames(builtSqlite));
    expect(columnNames(pgKeysTable())).toEqual(columnNames(builtPg));
    expect(columnNames(mysqlKeysTable())).toEqual(columnNames(builtMysql));
    expect(columnNames(pgPushTables().keys)).toEqual(columnNames(builtPgPush));
    expect(Object.keys(getTableColumns(sqlitePushTables().journal))).toEqual([
      'id',
      'hash',
      'createdAt',
    ]);
  });
});
