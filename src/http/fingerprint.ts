import { createHash, type Hash } from 'node:crypto';
import { BodyRefusedError } from './problems.js';
import type { IdempotentRequest } from './request.js';
import { utf8Text } from './response.js';

// What an entry of the walk's stack holds (kept in two parallel arrays, so the walk allocates
// nothing per value): text to write as is, a value to write, or an object whose members are all
// written, leaving the ancestors' set.
const TEXT = 0;
const VALUE = 1;
const LEAVE = 2;
type Entry = typeof TEXT | typeof VALUE | typeof LEAVE;

function refuse(reason: string): never {
  throw new BodyRefusedError(`the request body cannot be fingerprinted: ${reason}`);
}

function resolved(value: unknown): unknown {
  const toJSON = (value as { toJSON?: unknown } | null | undefined)?.toJSON;
  return typeof toJSON === 'function' ? toJSON.call(value) : value;
}

// Values JSON.stringify leaves out of an object (and writes as null in an array).
function omitted(value: unknown): boolean {
  return value === undefined || typeof value === 'function' || typeof value === 'symbol';
}

/**
 * The RFC 8785 (JCS) canonical JSON text of a value: object keys sorted by UTF-16 code units,
 * numbers and strings written as ECMAScript writes them, no whitespace. It walks the value with an
 * explicit stack rather than recursion, so no nesting depth can overflow the call stack.
 *
 * @throws {@link BodyRefusedError} for a value JSON cannot represent: a non-finite number, a BigInt,
 * a cycle
 */
export function canonicalJson(root: unknown): string {
  let out = '';
  const ancestors = new Set<object>();
  const entries: Entry[] = [VALUE];
  const items: unknown[] = [root];
  for (let entry = entries.pop(); entry !== undefined; entry = entries.pop()) {
    const item = items.pop();
    if (entry === TEXT) {
      out += item as string;
      continue;
    }
    if (entry === LEAVE) {
      ancestors.delete(item as object);
      continue;
    }
    const value = resolved(item);
    switch (typeof value) {
      case 'string':
        out += JSON.stringify(value);
        continue;
      case 'number':
        if (!Number.isFinite(value)) refuse(`the number ${value} is not JSON`);
        // ECMAScript's Number::toString, which RFC 8785 prescribes (and -0 as 0).
        out += String(value);
        continue;
      case 'boolean':
        out += value ? 'true' : 'false';
        continue;
      case 'bigint':
        return refuse('a BigInt is not JSON');
      case 'undefined':
      case 'function':
      case 'symbol':
        out += 'null';
        continue;
    }
    if (value === null) {
      out += 'null';
      continue;
    }
    const object = value as object;
    if (ancestors.has(object)) refuse('it contains a cycle');
    ancestors.add(object);
    entries.push(LEAVE);
    items.push(object);
    if (Array.isArray(object)) {
      entries.push(TEXT);
      items.push(']');
      for (let index = object.length - 1; index >= 0; index--) {
        entries.push(VALUE);
        items.push(object[index]);
        if (index > 0) {
          entries.push(TEXT);
          items.push(',');
        }
      }
      out += '[';
    } else {
      const record = object as Record<string, unknown>;
      const keys = Object.keys(record)
        .filter((key) => !omitted(resolved(record[key])))
        .sort();
      entries.push(TEXT);
      items.push('}');
      for (let index = keys.length - 1; index >= 0; index--) {
        const key = keys[index] as string;
        entries.push(VALUE, TEXT);
        items.push(record[key], `${index > 0 ? ',' : ''}${JSON.stringify(key)}:`);
      }
      out += '{';
    }
  }
  return out;
}

/** A request body as the fingerprint sees it: nothing, a JSON value, or bytes that are not JSON. */
export type FingerprintBody =
  | { readonly kind: 'none' }
  | { readonly kind: 'json'; readonly value: unknown }
  | { readonly kind: 'bytes'; readonly bytes: Uint8Array };

/**
 * Classifies a body the way every adapter must, so the same bytes give the same fingerprint:
 * bytes (a `Uint8Array`, such as `express.raw`'s Buffer) and strings (`express.text`'s, taken as
 * their UTF-8 bytes) are JSON when they are UTF-8 text that parses as JSON, raw bytes otherwise;
 * anything else is an already parsed JSON value; `undefined` and zero bytes are no body.
 */
export function fingerprintBody(body: unknown): FingerprintBody {
  if (body === undefined) return { kind: 'none' };
  if (!(body instanceof Uint8Array) && typeof body !== 'string')
    return { kind: 'json', value: body };
  const bytes = typeof body === 'string' ? Buffer.from(body, 'utf8') : body;
  if (bytes.byteLength === 0) return { kind: 'none' };
  const text = typeof body === 'string' ? body : utf8Text(bytes);
  if (text !== undefined) {
    try {
      return { kind: 'json', value: JSON.parse(text) as unknown };
    } catch {
      // Not JSON: fingerprinted as the bytes themselves.
    }
  }
  return { kind: 'bytes', bytes };
}

/**
 * The default request fingerprint: a SHA-256 (hex) over the method (upper case), the path and the
 * body. A body that is JSON (parsed, or bytes that parse as JSON) counts as its RFC 8785 canonical
 * JSON, so keys in another order or `1.0` for `1` are the same request; any other body counts as
 * its exact bytes, so `[0xff]` and `[0xfe]` differ. For a JSON body or none the value is the one
 * 0.1.0 computed (`sha256(JCS({ method, path, body }))`), so keys stored by 0.1.0 still match.
 * Headers and the query string are not part of it; pass your own `fingerprint` option to add them.
 *
 * @example
 * ```ts
 * import { requestFingerprint } from 'drizzle-idempotency/http';
 *
 * const same =
 *   requestFingerprint({ method: 'POST', path: '/payments', headers: {}, body: { a: 1, b: 2 } }) ===
 *   requestFingerprint({ method: 'post', path: '/payments', headers: {}, body: '{"b":2,"a":1}' });
 * ```
 * @throws {@link BodyRefusedError} (a 400 problem) for a parsed body JSON cannot represent: a
 * non-finite number, a BigInt, a cycle; a body parsed from JSON never is one
 */
export function requestFingerprint(request: IdempotentRequest): string {
  const head = { method: request.method.toUpperCase(), path: request.path };
  const body = fingerprintBody(request.body);
  const hash: Hash = createHash('sha256');
  if (body.kind === 'none') hash.update(canonicalJson(head));
  else if (body.kind === 'json') hash.update(canonicalJson({ ...head, body: body.value }));
  // `{"bodyBytes":…` never starts the canonical text of the other two forms (`{"body":` or
  // `{"method":`), so raw bytes can never collide with a JSON body.
  else hash.update(canonicalJson({ ...head, bodyBytes: body.bytes.byteLength })).update(body.bytes);
  return hash.digest('hex');
}
