/** The longest idempotency key accepted, in characters (Stripe's limit). */
export const MAX_KEY_LENGTH = 255;

/** The header that carries the key, in the lower case Node and Hono use for header names. */
export const IDEMPOTENCY_KEY_HEADER = 'idempotency-key';

/** What {@link parseIdempotencyKey} found in the header. */
export type ParsedKey =
  | { readonly ok: true; readonly key: string }
  | { readonly ok: false; readonly reason: string };

// RFC 8941 sf-string: DQUOTE *( unescaped / "\" ( DQUOTE / "\" ) ) DQUOTE, where unescaped is
// printable ASCII (0x20–0x7E) except DQUOTE and backslash; and here except the comma too.
const QUOTED = /^"((?:[\x20\x21\x23-\x2B\x2D-\x5B\x5D-\x7E]|\\["\\])*)"$/;
// A quoted key of 1 or more characters with nothing escaped: the key is what lies between the
// quotes.
const PLAIN_QUOTED = /^"[\x20\x21\x23-\x2B\x2D-\x5B\x5D-\x7E]+"$/;
// The common bare form: visible ASCII (0x21–0x7E) but the comma. Not starting with a quote, so a
// broken quoted string is refused instead of being taken literally.
const BARE = /^[\x21\x23-\x2B\x2D-\x7E][\x21-\x2B\x2D-\x7E]*$/;

function isSpaceOrTab(code: number): boolean {
  return code === 0x20 || code === 0x09;
}

// The value without the spaces and tabs around it, found by walking in from each end: a regex
// such as `/[ \t]+$/` retries from every space of a long run (`a`, 16,000 spaces, `b`), which is
// quadratic in a header the client controls.
function trimSpaces(value: string): string {
  let start = 0;
  let end = value.length;
  while (start < end && isSpaceOrTab(value.charCodeAt(start))) start++;
  while (end > start && isSpaceOrTab(value.charCodeAt(end - 1))) end--;
  return value.slice(start, end);
}

/**
 * Reads an `Idempotency-Key` header value. Two forms are accepted:
 *
 * - the draft's Structured Field string, `"abc"`: printable ASCII (0x20–0x7E, spaces included)
 *   but the comma, between double quotes, with `\"` and `\\` as the only escapes; no parameters
 *   after it;
 * - the common bare form, `abc`: visible ASCII only (0x21–0x7E, no spaces) but the comma, not
 *   starting with `"`.
 *
 * Both give the same key (`"abc"` and `abc` are one key). The key must have 1 to
 * {@link MAX_KEY_LENGTH} characters once unquoted. Whitespace around the value is ignored, as in
 * HTTP. No key holds a comma: HTTP joins repeated header lines with `, ` (Node, and the Fetch
 * `Headers` Hono and Fetch handlers get, both do), so a comma is how two lines sent as one key
 * would look, and the header sent twice is refused on every adapter alike.
 *
 * @example
 * ```ts
 * parseIdempotencyKey('"8e03978e-40d5"'); // { ok: true, key: '8e03978e-40d5' }
 * parseIdempotencyKey('order 42');        // { ok: false, reason: '…' }
 * ```
 */
export function parseIdempotencyKey(value: string): ParsedKey {
  // The common forms, a quoted key without escapes or a bare one, settled by one test each.
  if (value.length <= MAX_KEY_LENGTH + 2) {
    if (PLAIN_QUOTED.test(value)) return { ok: true, key: value.slice(1, -1) };
    if (BARE.test(value) && value.length <= MAX_KEY_LENGTH) return { ok: true, key: value };
  }
  const trimmed = trimSpaces(value);
  if (trimmed === '') return { ok: false, reason: 'the key must not be empty' };
  let key: string;
  const quoted = QUOTED.exec(trimmed);
  if (quoted) {
    key = (quoted[1] ?? '').replace(/\\(["\\])/g, '$1');
  } else if (BARE.test(trimmed)) {
    key = trimmed;
  } else if (trimmed.startsWith('"')) {
    return {
      ok: false,
      reason:
        'a quoted key must be one Structured Field string: printable ASCII but the comma between double quotes, with only \\" and \\\\ escaped, and nothing after it; the header must be sent once',
    };
  } else {
    return {
      ok: false,
      reason:
        'a bare key must be visible ASCII characters (0x21–0x7E) without spaces or commas, in one header line; quote it as a Structured Field string ("…") to include spaces',
    };
  }
  if (key.length === 0) return { ok: false, reason: 'the key must not be empty' };
  if (key.length > MAX_KEY_LENGTH) {
    return {
      ok: false,
      reason: `the key must be at most ${MAX_KEY_LENGTH} characters, got ${key.length}`,
    };
  }
  return { ok: true, key };
}
