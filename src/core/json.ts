import { UnserializableResponseError } from './errors.js';

/** A value JSON represents exactly: what `parse(stringify(v))` gives back unchanged. */
export type JsonValue =
  | null
  | boolean
  | number
  | string
  | JsonValue[]
  | { [key: string]: JsonValue };

function childPath(path: string, key: string): string {
  return /^[A-Za-z_$][\w$]*$/.test(key) ? `${path}.${key}` : `${path}[${JSON.stringify(key)}]`;
}

// JSON.stringify never fails loudly on the values that matter here: it drops `undefined` and
// functions, writes NaN as null, empties Maps and fills array holes. A stored answer must replay
// exactly what was given, so every such value is refused before anything is written.
function check(value: unknown, path: string, ancestors: Set<object>): void {
  switch (typeof value) {
    case 'string':
    case 'boolean':
      return;
    case 'number':
      if (!Number.isFinite(value)) throw new UnserializableResponseError(path, String(value));
      return;
    case 'undefined':
    case 'function':
    case 'symbol':
    case 'bigint':
      throw new UnserializableResponseError(path, `a value of type ${typeof value}`);
  }
  if (value === null) return;
  const object = value as object;
  if (ancestors.has(object)) throw new UnserializableResponseError(path, 'a circular reference');
  const toJSON = (object as { toJSON?: unknown }).toJSON;
  if (typeof toJSON === 'function') {
    ancestors.add(object);
    check(toJSON.call(object, ''), path, ancestors);
    ancestors.delete(object);
    return;
  }
  ancestors.add(object);
  if (Array.isArray(object)) {
    for (let index = 0; index < object.length; index++) {
      if (!(index in object)) throw new UnserializableResponseError(`${path}[${index}]`, 'a hole');
      check(object[index], `${path}[${index}]`, ancestors);
    }
  } else {
    const proto = Object.getPrototypeOf(object);
    if (proto !== Object.prototype && proto !== null) {
      const name = (object.constructor as { name?: string } | undefined)?.name ?? 'unknown';
      throw new UnserializableResponseError(path, `an instance of ${name}`);
    }
    if (Object.getOwnPropertySymbols(object).length > 0) {
      throw new UnserializableResponseError(path, 'a symbol-keyed property');
    }
    for (const [key, child] of Object.entries(object)) {
      check(child, childPath(path, key), ancestors);
    }
  }
  ancestors.delete(object);
}

/**
 * Turns a response into the JSON text that is stored, refusing anything JSON cannot represent
 * faithfully. Objects with a `toJSON` method (such as `Date`) are stored as what it returns.
 *
 * @example
 * ```ts
 * serializeResponse({ receipt: 1 }); // '{"receipt":1}'
 * serializeResponse({ total: NaN }); // throws UnserializableResponseError (path "$.total")
 * ```
 * @throws {@link UnserializableResponseError} naming the path of the first offending value, or
 * `$` for a value nested too deeply to check
 */
export function serializeResponse(response: unknown): string {
  try {
    check(response, '$', new Set());
    return JSON.stringify(response);
  } catch (error) {
    // Nesting deeper than the call stack (a few thousand levels) overflows it: a hostile body,
    // refused like the others instead of surfacing as a bare RangeError.
    if (error instanceof RangeError) {
      throw new UnserializableResponseError('$', 'nesting too deep to check');
    }
    throw error;
  }
}

/**
 * Parses stored JSON text back into the response.
 *
 * @param text - the JSON text written by {@link serializeResponse}
 */
export function parseResponse<T>(text: string): T {
  return JSON.parse(text) as T;
}
