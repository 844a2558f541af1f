/** A column of an existing `keys` table, as its dialect's catalog describes it. */
export interface ExistingColumn {
  /** The column's name. */
  readonly name: string;
  /** Its type, in the form the dialect's expected types are written in. */
  readonly type: string;
  /** Whether it is part of the primary key. */
  readonly primary: boolean;
}

/** The type an adopted column must have, or the list of types it may have. */
export type ColumnType = string | readonly string[];

/**
 * Lists what keeps an existing `keys` table from being adopted as a store: a missing or extra
 * column, a column of another type, or a primary key other than `id` alone (the primary key is
 * what makes `reserve` atomic). Empty when the table fits; each dialect adds its own checks.
 *
 * @param columns - the table's columns; an empty list means there is no table
 * @param expected - the contract's columns and their types, as the dialect writes them; a list
 *   names every type a column may have (its type now, and the one an earlier migration gave it,
 *   which a pending migration changes)
 * @param optional - columns a later migration adds (the lease columns): a table made before it
 *   may lack them, but one that has them must have them with these types
 * @example
 * ```ts
 * keysTableProblems([{ name: 'id', type: 'TEXT', primary: true }], { id: 'TEXT', expires: 'REAL' });
 * // ['missing column expires']
 * ```
 */
export function keysTableProblems(
  columns: readonly ExistingColumn[],
  expected: Readonly<Record<string, ColumnType>>,
  optional: Readonly<Record<string, ColumnType>> = {},
): string[] {
  const problems: string[] = [];
  const names = columns.map((column) => column.name);
  for (const name of Object.keys(expected)) {
    if (!names.includes(name)) problems.push(`missing column ${name}`);
  }
  for (const column of columns) {
    const type = expected[column.name] ?? optional[column.name];
    const types: readonly string[] = typeof type === 'string' ? [type] : (type ?? []);
    if (type === undefined) problems.push(`unexpected column ${column.name}`);
    else if (!types.includes(column.type)) {
      problems.push(
        `column ${column.name} is ${column.type || 'untyped'}, expected ${types.join(' or ')}`,
      );
    }
  }
  const primaryKey = columns.filter((column) => column.primary).map((column) => column.name);
  if (primaryKey.join() !== 'id') problems.push('id is not the sole primary key');
  return problems;
}
