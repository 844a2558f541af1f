import { UnserializableResponseError } from './errors.js';

/** A value JSON represents exactly: what `parse(stringify(v))` gives back unchanged. */
export type JsonValue =
  | null
  | boolean
  | number
  | string
  | JsonValue[]
  | { [key: string]: JsonValue };

// One segment of the way from the root to a value: an object key or an array index.
type Segment = string | number;

function formatPath(segments: readonly Segment[]): string {
  let path = '$';
  for (const segment of segments) {
    if (typeof segment === 'number') path += `[${segment}]`;
    else
      path += /^[A-Za-z_$][\w$]*$/.test(segment) ? `.${segment}` : `[${JSON.stringify(segment)}]`;
  }
  return path;
}

// JSON.stringify never fails loudly on the values that matter here: it drops `undefined` and
// functions, writes NaN as null, empties Maps and fills array holes. A stored answer must replay
// exactly what was given, so every such value is refused before anything is written.
// The walk runs on every stored answer, so it keeps the way down as a stack of segments and only
// turns it into a path string for the error; `ancestors` holds the objects being walked, to refuse
// a cycle (the stack is as deep as the nesting, which real answers keep shallow).
function check(value: unknown, segments: Segment[], ancestors: object[]): void {
  switch (typeof value) {
    case 'string':
    case 'boolean':
      return;
    case 'number':
      if (!Number.isFinite(value)) {
        throw new UnserializableResponseError(formatPath(segments), String(value));
      }
      return;
    case 'undefined':
    case 'function':
    case 'symbol':
    case 'bigint':
      throw new UnserializableResponseError(
        formatPath(segments),
        `a value of type ${typeof value}`,
      );
  }
  if (value === null) return;
  const object = value as object;
  if (ancestors.includes(object)) {
    throw new UnserializableResponseError(formatPath(segments), 'a circular reference');
  }
  ancestors.push(object);
  const toJSON = (object as { toJSON?: unknown }).toJSON;
  if (typeof toJSON === 'function') {
    check(toJSON.call(object, ''), segments, ancestors);
  } else if (Array.isArray(object)) {
    for (let index = 0; index < object.length; index++) {
      const item: unknown = object[index];
      segments.push(index);
      if (item === undefined && !(index in object)) {
        throw new UnserializableResponseError(formatPath(segments), 'a hole');
      }
      check(item, segments, ancestors);
      segments.pop();
    }
  } else {
    const proto = Object.getPrototypeOf(object);
    if (proto !== Object.prototype && proto !== null) {
      const name = (object.constructor as { name?: string } | undefined)?.name ?? 'unknown';
      throw new UnserializableResponseError(formatPath(segments), `an instance of ${name}`);
    }
    if (Object.getOwnPropertySymbols(object).length > 0) {
      throw new UnserializableResponseError(formatPath(segments), 'a symbol-keyed property');
    }
    const record = object as Record<string, unknown>;
    for (const key of Object.keys(record)) {
      segments.push(key);
      check(record[key], segments, ancestors);
      segments.pop();
    }
  }
  ancestors.pop();
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
    check(response, [], []);
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
