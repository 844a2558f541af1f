import { scopePrefix } from '../core/erasure.js';
import { InvalidOptionError } from '../core/errors.js';

/**
 * The id a key is stored under. Unscoped, it is the key itself; scoped, it is the scope as a JSON
 * string, U+001F, then the key. Scope `a:b` with key `c` and scope `a` with key `b:c` are
 * different ids, and so is every scoped id from every unscoped key.
 *
 * @example
 * ```ts
 * storedId(undefined, 'order-42'); // 'order-42'
 * storedId('client-7', 'order-42'); // '"client-7"\u001forder-42'
 * ```
 * @throws {@link InvalidOptionError} for a scope that is not a non-empty string
 */
export function storedId(scope: string | undefined, key: string): string {
  if (scope === undefined) return key;
  if (typeof scope !== 'string' || scope.length === 0 || !scope.isWellFormed()) {
    throw new InvalidOptionError('scope must be a non-empty, well-formed string or undefined');
  }
  return `${scopePrefix(scope)}${key}`;
}
