import { entityKind } from 'drizzle-orm';

/**
 * Whether `value` is an instance of the drizzle class whose entity kind is `kind`, or of a
 * subclass. drizzle's `is` needs the class itself, and importing a driver's module for it would
 * load the driver (`pg`, `mysql2`), which users of another driver need not install; the entity
 * kind names the class just as well.
 *
 * @param value - anything
 * @param kind - a drizzle entity kind, such as `'NodePgDatabase'`
 */
export function isEntityKind(value: unknown, kind: string): boolean {
  if (typeof value !== 'object' || value === null) return false;
  for (
    let cls: unknown = value.constructor;
    typeof cls === 'function';
    cls = Object.getPrototypeOf(cls)
  ) {
    if ((cls as { [entityKind]?: string })[entityKind] === kind) return true;
  }
  return false;
}
