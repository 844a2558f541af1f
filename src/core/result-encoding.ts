// How `makeIdempotent`'s default codec stores a result that JSON alone cannot give back exactly.
// The stored JSON is one of three envelopes:
//   {}                  the function returned undefined;
//   { value: JSON }     plain JSON data (what every earlier version wrote, so its rows still replay);
//   { encoded: JSON }   data holding a value JSON has no form for, each such value written as a
//                       tagged object { "$t": tag, "v": … }: a Date, -0, NaN, ±Infinity, a BigInt,
//                       undefined in an array. A plain object that has a "$t" member of its own is
//                       wrapped as { "$t": "object", "v": … }, so no data is read as a tag.
// An object member that is undefined is left out, as JSON.stringify leaves it out. Anything else
// (a Map, a Set, a class instance, a function, a symbol, a cycle) has no faithful form here and is
// refused with an UnserializableResponseError naming where it sits.

import { UnserializableResponseError } from './errors.js';
import type { JsonValue } from './json.js';

const TAG = '$t';

type Tagged = { [TAG]: string; v?: JsonValue };

function tagged(tag: string, v?: JsonValue): Tagged {
  return v === undefined ? { [TAG]: tag } : { [TAG]: tag, v };
}

// An own member, even one named `__proto__`, which plain assignment would take as the prototype.
function setOwn(target: object, key: string, value: unknown): void {
  Object.defineProperty(target, key, {
    value,
    enumerable: true,
    writable: true,
    configurable: true,
  });
}

function describe(value: object): string {
  const name = (value.constructor as { name?: unknown } | undefined)?.name;
  return typeof name === 'string' && name !== '' ? `an instance of ${name}` : 'an exotic object';
}

function childPath(path: string, key: string | number): string {
  if (typeof key === 'number') return `${path}[${key}]`;
  return /^[A-Za-z_$][\w$]*$/.test(key) ? `${path}.${key}` : `${path}[${JSON.stringify(key)}]`;
}

// The encoding of one value. `state.tags` counts the tagged values written, so a result that
// needed none is stored in the plain envelope.
function encode(
  value: unknown,
  path: string,
  ancestors: Set<object>,
  state: { tags: number },
): JsonValue {
  switch (typeof value) {
    case 'string':
    case 'boolean':
      return value;
    case 'number':
      if (Number.isFinite(value) && !Object.is(value, -0)) return value;
      state.tags++;
      return tagged('number', Object.is(value, -0) ? '-0' : String(value));
    case 'bigint':
      state.tags++;
      return tagged('bigint', value.toString());
    case 'undefined':
      state.tags++;
      return tagged('undefined');
    case 'function':
    case 'symbol':
      throw new UnserializableResponseError(path, `a ${typeof value}`);
  }
  if (value === null) return null;
  const object = value as object;
  const proto = Object.getPrototypeOf(object);
  if (proto === Date.prototype) {
    state.tags++;
    const time = (object as Date).getTime();
    return tagged('date', Number.isNaN(time) ? null : time);
  }
  if (ancestors.has(object)) throw new UnserializableResponseError(path, 'a circular reference');
  ancestors.add(object);
  let encoded: JsonValue;
  if (Array.isArray(object) && proto === Array.prototype) {
    // A hole reads as undefined and is stored as undefined.
    const items: JsonValue[] = [];
    for (let index = 0; index < object.length; index++) {
      items.push(encode(object[index], childPath(path, index), ancestors, state));
    }
    encoded = items;
  } else if (proto === Object.prototype || proto === null) {
    if (Object.getOwnPropertySymbols(object).length > 0) {
      throw new UnserializableResponseError(path, 'a symbol-keyed property');
    }
    const record = object as Record<string, unknown>;
    const members: { [key: string]: JsonValue } = {};
    for (const key of Object.keys(record)) {
      const member = record[key];
      if (member === undefined) continue;
      setOwn(members, key, encode(member, childPath(path, key), ancestors, state));
    }
    if (Object.hasOwn(members, TAG)) {
      state.tags++;
      encoded = tagged('object', members);
    } else {
      encoded = members;
    }
  } else {
    throw new UnserializableResponseError(path, describe(object));
  }
  ancestors.delete(object);
  return encoded;
}

/**
 * The stored form of a function's result (see the envelopes above).
 *
 * @throws {@link UnserializableResponseError} for a value with no faithful stored form, naming
 * its path (`$.items[2]`)
 */
export function encodeResult(result: unknown): JsonValue {
  if (result === undefined) return {};
  const state = { tags: 0 };
  let encoded: JsonValue;
  try {
    encoded = encode(result, '$', new Set(), state);
  } catch (error) {
    // Nesting deeper than the call stack: refused like the others, not a bare RangeError.
    if (error instanceof RangeError) {
      throw new UnserializableResponseError('$', 'nesting too deep to store');
    }
    throw error;
  }
  return state.tags === 0 ? { value: encoded } : { encoded };
}

function decode(stored: JsonValue): unknown {
  if (Array.isArray(stored)) return stored.map(decode);
  if (stored === null || typeof stored !== 'object') return stored;
  if (!Object.hasOwn(stored, TAG)) return decodeMembers(stored);
  const v = stored.v;
  switch (stored[TAG]) {
    case 'number':
      return v === '-0' ? -0 : Number(v);
    case 'bigint':
      return BigInt(v as string);
    case 'undefined':
      return undefined;
    case 'date':
      return new Date(typeof v === 'number' ? v : Number.NaN);
    default:
      return decodeMembers(v as { [key: string]: JsonValue });
  }
}

function decodeMembers(stored: { [key: string]: JsonValue }): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const key of Object.keys(stored)) setOwn(out, key, decode(stored[key] as JsonValue));
  return out;
}

/** The result a stored envelope of {@link encodeResult} gives back. */
export function decodeResult(stored: JsonValue): unknown {
  const envelope = stored as { value?: JsonValue; encoded?: JsonValue };
  if ('encoded' in envelope) return decode(envelope.encoded as JsonValue);
  return 'value' in envelope ? envelope.value : undefined;
}
