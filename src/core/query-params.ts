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
export function paramSlot(param: unknown): ParamSlot {
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
