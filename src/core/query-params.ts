import { is, Param, Placeholder } from 'drizzle-orm';

/** Where a compiled query takes one parameter from: a named placeholder, or a fixed value. */
export type ParamSlot = { readonly name: string } | { readonly value: unknown };

/**
 * Says where one parameter of a drizzle query's `toSQL()` comes from, for a store that binds its
 * hot statements itself instead of through drizzle.
 *
 * Inserted values come wrapped in a Param carrying the column's encoder. Binding them directly
 * skips that encoder, which is only sound when it is the identity (the store's text and real or
 * double precision columns), so any other encoder is refused.
 *
 * @param param - one entry of `query.toSQL().params`
 * @throws Error when a placeholder carries a column encoder that is not the identity
 * @example
 * ```ts
 * const slots = query.toSQL().params.map(paramSlot); // [{ name: 'id' }, { value: 'pending' }, …]
 * ```
 */
function paramSlot(param: unknown): ParamSlot {
  if (is(param, Placeholder)) return { name: param.name };
  if (is(param, Param) && is(param.value, Placeholder)) {
    const probe = {};
    if (param.encoder?.mapToDriverValue(probe) !== probe) {
      throw new Error(`placeholder ${param.value.name} has a column encoder`);
    }
    return { name: param.value.name };
  }
  return { value: param };
}

/** A drizzle query that can show its SQL: every builder has `toSQL()`. */
export interface ToSql {
  toSQL(): { sql: string; params: unknown[] };
}

/**
 * Compiles a drizzle query's text and parameter slots once, for a store that binds its
 * statements itself, checking them against the placeholder names its callers pass: a query whose
 * parameters drift from its callers then fails when the store is built, instead of sending a value
 * as NULL or binding it to the wrong column.
 *
 * @param query - a drizzle query built with `sql.placeholder` for the per-call values
 * @param names - the placeholder names the callers bind
 * @param positional - the callers bind by position: the parameters must be exactly `names`, in
 *   that order, and none a fixed value. Otherwise each placeholder must be one of `names` and each
 *   name used, and fixed values (a status literal) stay bound where drizzle put them.
 * @throws Error when the parameters do not match, or a placeholder carries a column encoder
 * @example
 * ```ts
 * const { sql, slots } = compileSlots(query, ['id', 'now']);
 * ```
 */
export function compileSlots(
  query: ToSql,
  names: readonly string[],
  positional = false,
): { sql: string; slots: ParamSlot[] } {
  const { sql, params } = query.toSQL();
  const slots = params.map(paramSlot);
  if (positional) {
    const actual = slots.map((slot) => ('name' in slot ? slot.name : 'a bound value'));
    if (actual.length !== names.length || actual.some((name, index) => name !== names[index])) {
      throw new Error(
        `query parameters are [${actual.join(', ')}], expected placeholders [${names.join(', ')}]`,
      );
    }
    return { sql, slots };
  }
  const used = new Set(slots.flatMap((slot) => ('name' in slot ? [slot.name] : [])));
  const expected = new Set(names);
  if (used.size !== expected.size || [...used].some((name) => !expected.has(name))) {
    throw new Error(
      `query placeholders are [${[...used].join(', ')}], expected [${[...expected].join(', ')}]`,
    );
  }
  return { sql, slots };
}
