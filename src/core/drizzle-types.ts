/**
 * Types written so that the published declarations typecheck against drizzle-orm 0.45 and 1.0
 * alike. The two majors renamed their database and transaction classes and changed the generics
 * of their columns, so a declaration that names a class or a column type of one major breaks a
 * consumer of the other (under `skipLibCheck: false`). What is here names only what both have.
 *
 * @module
 */

import type * as sqliteCore from 'drizzle-orm/sqlite-core';

/**
 * The instance type of the first of `names` that `module` exports as a class, its generics all
 * `any`: how a declaration refers to a drizzle class that the two majors call differently
 * (`PgDatabase` in 0.45, `PgAsyncDatabase` in 1.0) without naming the one that is missing.
 */
export type ClassOf<Module, Names extends readonly string[]> = Names extends readonly [
  infer Name extends string,
  ...infer Rest extends readonly string[],
]
  ? Module extends { readonly [K in Name]: { readonly prototype: infer Instance } }
    ? Instance
    : ClassOf<Module, Rest>
  : never;

/** The transaction a database's `transaction(callback)` hands its callback. */
export type TransactionOf<Database> = Database extends {
  // biome-ignore lint/suspicious/noExplicitAny: only the callback's parameter is read
  transaction(callback: (tx: infer Tx, ...rest: any[]) => any, ...config: any[]): any;
}
  ? Tx
  : never;

/** What a column's type says of it, besides its table: the facts both majors read. */
export interface ColumnFacts {
  readonly name: string;
  readonly dataType: 'string' | 'number' | 'boolean' | 'custom';
  readonly columnType: string;
  readonly data: unknown;
  readonly driverParam: unknown;
  readonly notNull: boolean;
  readonly hasDefault: boolean;
  readonly isPrimaryKey: boolean;
  readonly enumValues: [string, ...string[]] | undefined;
}

/**
 * A column's type configuration in table `TableName`, with every field either major requires
 * (0.45's `columnType` and `baseColumn`, 1.0's `generated` and `identity`): the argument of a
 * dialect's column class, or of `Column` itself.
 */
export type ColumnConfig<TableName extends string, Facts extends ColumnFacts> = {
  name: Facts['name'];
  tableName: TableName;
  dataType: Facts['dataType'];
  columnType: Facts['columnType'];
  data: Facts['data'];
  driverParam: Facts['driverParam'];
  notNull: Facts['notNull'];
  hasDefault: Facts['hasDefault'];
  isPrimaryKey: Facts['isPrimaryKey'];
  isAutoincrement: false;
  hasRuntimeDefault: false;
  enumValues: Facts['enumValues'];
  baseColumn: never;
  identity: undefined;
  generated: undefined;
};

/**
 * drizzle's SQLite database class, `BaseSQLiteDatabase` in 0.45 and `SQLiteAsyncDatabase` in 1.0
 * (which serves the synchronous drivers too), whichever the installed drizzle-orm has. Its
 * generics are all `any`: the declarations cannot name them in a form both majors accept.
 */
export type AnySqliteDatabase = ClassOf<
  typeof sqliteCore,
  ['SQLiteAsyncDatabase', 'BaseSQLiteDatabase']
>;
