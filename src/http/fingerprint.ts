import { createHash } from 'node:crypto';
import { canonicalJsonText, canonicalJson as canonicalValue } from '../core/canonical-json.js';
import { type IgnoredMembers, withoutIgnored } from '../core/json-pointer.js';
import { type MemberFingerprint, memberFingerprint } from '../core/member-digests.js';
import { sha256Hex } from '../core/sha256.js';
import { BodyRefusedError } from './problems.js';
import type { IdempotentRequest } from './request.js';
import { utf8Text } from './response.js';

function refuse(reason: string): never {
  throw new BodyRefusedError(`the request body cannot be fingerprinted: ${reason}`);
}

/**
 * The RFC 8785 (JCS) canonical JSON text of a JavaScript value: object keys sorted by UTF-16 code
 * units, numbers and strings written as ECMAScript writes them, no whitespace. It walks the value
 * with an explicit stack rather than recursion, so no nesting depth can overflow the call stack.
 * A value has already lost what `JSON.parse` collapses (digits beyond a double, a repeated
 * member); the fingerprint reads JSON text itself whenever it has it (see
 * {@link requestFingerprint}).
 *
 * @throws {@link BodyRefusedError} for a value JSON cannot represent: a non-finite number, a
 * BigInt, a cycle
 */
export function canonicalJson(root: unknown): string {
  return canonicalValue(root, refuse);
}

/**
 * A request body as the fingerprint sees it: nothing, JSON (its canonical text), or bytes that
 * are not JSON.
 */
type FingerprintBody =
  | { readonly kind: 'none' }
  | { readonly kind: 'json'; readonly canonical: string }
  | { readonly kind: 'bytes'; readonly bytes: Uint8Array };

/**
 * Classifies a body the way every adapter must, so the same bytes give the same fingerprint:
 * bytes (a `Uint8Array`, such as `express.raw`'s Buffer or the raw body every adapter reads) and
 * strings (`express.text`'s, taken as their UTF-8 bytes) are JSON when they are UTF-8 text that
 * is JSON (a leading byte order mark ignored), read as written (see `canonicalJsonText`: every
 * digit of a number and every member kept), and raw bytes otherwise; anything else is an already
 * parsed JSON value; `undefined` and zero bytes are no body.
 *
 * @throws {@link BodyRefusedError} for a parsed value JSON cannot represent
 */
function fingerprintBody(body: unknown): FingerprintBody {
  if (body === undefined) return { kind: 'none' };
  if (!(body instanceof Uint8Array) && typeof body !== 'string') {
    return { kind: 'json', canonical: canonicalJson(body) };
  }
  const bytes = typeof body === 'string' ? Buffer.from(body, 'utf8') : body;
  if (bytes.byteLength === 0) return { kind: 'none' };
  const text = typeof body === 'string' ? body : utf8Text(bytes);
  const canonical = text === undefined ? undefined : canonicalJsonText(text);
  return canonical === undefined ? { kind: 'bytes', bytes } : { kind: 'json', canonical };
}

const UNRESERVED = /^[A-Za-z0-9._~-]$/;
// What a path may hold as it is (RFC 3986 pchar and "/", "%" only before two hex digits).
const PATH_CHARACTER = /[A-Za-z0-9._~!$&'()*+,;=:@/-]/;
const PERCENT = /^%[0-9A-Fa-f]{2}/;
// A path made of such characters alone, without "%".
const PLAIN_PATH = /^[A-Za-z0-9._~!$&'()*+,;=:@/-]*$/;

/**
 * The path as the fingerprint compares it, the same rule whatever the adapter read: RFC 3986's
 * normalisation (§6.2.2). A percent-encoded unreserved character is that character (`/p%61y` is
 * `/pay`), other percent-encodings get upper-case hex (`%2f` is `%2F`, and stays apart from `/`),
 * a character a path cannot hold raw is percent-encoded as UTF-8 (`{` is `%7B`, as a Fetch `URL`
 * writes it), and `.` and `..` segments are removed (§5.2.4).
 */
export function fingerprintPath(path: string): string {
  // The usual path holds nothing to encode or decode: only its dot segments can change it.
  if (PLAIN_PATH.test(path)) return removeDotSegments(path);
  let encoded = '';
  for (let at = 0; at < path.length; at++) {
    const char = path[at] as string;
    if (char === '%' && PERCENT.test(path.slice(at, at + 3))) {
      const decoded = String.fromCharCode(Number.parseInt(path.slice(at + 1, at + 3), 16));
      encoded += UNRESERVED.test(decoded) ? decoded : path.slice(at, at + 3).toUpperCase();
      at += 2;
    } else if (PATH_CHARACTER.test(char)) {
      encoded += char;
    } else {
      const point = path.codePointAt(at) as number;
      const whole = String.fromCodePoint(point);
      // encodeURIComponent encodes every character that gets here; a lone surrogate, which it
      // refuses, is U+FFFD, as a Fetch URL writes it.
      encoded += whole.isWellFormed() ? encodeURIComponent(whole) : '%EF%BF%BD';
      at += whole.length - 1;
    }
  }
  return removeDotSegments(encoded);
}

// RFC 3986 §5.2.4, on a path without a scheme or authority.
function removeDotSegments(path: string): string {
  if (!/(?:^|\/)\.\.?(?:\/|$)/.test(path)) return path;
  const output: string[] = [];
  const segments = path.split('/');
  const absolute = path.startsWith('/');
  for (let index = absolute ? 1 : 0; index < segments.length; index++) {
    const segment = segments[index] as string;
    const last = index === segments.length - 1;
    if (segment === '.' || segment === '..') {
      if (segment === '..') output.pop();
      if (last) output.push('');
    } else {
      output.push(segment);
    }
  }
  return `${absolute ? '/' : ''}${output.join('/')}`;
}

/**
 * The default request fingerprint: a SHA-256 (hex) over the method (upper case), the path (as
 * {@link fingerprintPath} normalises it) and the body. A JSON body counts as its canonical JSON,
 * so keys in another order or `1.0` for `1` are the same request. JSON *text* (bytes, a string)
 * is read as written: numbers keep every digit (`0.30000000000000000001` is not `0.3`; `1e400`
 * is a number, not Infinity) and a member sent twice counts twice, so two bodies a JSON parser
 * would read alike but that say different things are different requests. An already parsed body
 * counts as its RFC 8785 canonical JSON. Any other body counts as its exact bytes, so `[0xff]`
 * and `[0xfe]` differ. For a JSON body whose numbers are written as a double writes them and
 * whose names are unique, or no body, the value is the one 0.1.0 computed
 * (`sha256(JCS({ method, path, body }))`), so keys stored by 0.1.0 still match. Headers and the
 * query string are not part of it; pass your own `fingerprint` option to add them.
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
 * non-finite number, a BigInt, a cycle; JSON text never is one
 */
export function requestFingerprint(request: IdempotentRequest): string {
  return requestDigest(request, fingerprintBody(request.body));
}

// The digest of `request` with the body `body` (its JSON already without any ignored members).
function requestDigest(request: IdempotentRequest, body: FingerprintBody): string {
  // The canonical text of { method, path, body } without building the object: "body" sorts
  // before "method", which sorts before "path".
  const head = `"method":${JSON.stringify(request.method.toUpperCase())},"path":${JSON.stringify(
    fingerprintPath(request.path),
  )}`;
  if (body.kind === 'none') return sha256Hex(`{${head}}`);
  if (body.kind === 'json') return sha256Hex(`{"body":${body.canonical},${head}}`);
  // `{"bodyBytes":…` never starts the canonical text of the other two forms (`{"body":` or
  // `{"method":`), so raw bytes can never collide with a JSON body.
  return createHash('sha256')
    .update(`{"bodyBytes":${body.bytes.byteLength},${head}}`)
    .update(body.bytes)
    .digest('hex');
}

/**
 * The fingerprint the layer keeps with a key: {@link requestFingerprint}'s digest, computed with
 * the members `ignored` names left out of a JSON body, and the digests of the body's top-level
 * members, so a key reused with another body can name the members that differ. A body that is
 * not JSON counts as its bytes, whatever `ignored` says; without `ignored` the digest is
 * `requestFingerprint`'s.
 *
 * @throws {@link BodyRefusedError} as {@link requestFingerprint} does
 */
export function keptRequestFingerprint(
  request: IdempotentRequest,
  ignored: IgnoredMembers | undefined,
): MemberFingerprint {
  const body = fingerprintBody(request.body);
  if (body.kind !== 'json') return { digest: requestDigest(request, body), members: undefined };
  const canonical =
    ignored === undefined ? body.canonical : withoutIgnored(body.canonical, ignored);
  return memberFingerprint(requestDigest(request, { kind: 'json', canonical }), canonical);
}
