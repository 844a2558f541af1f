import { SchemaMismatchError } from '../core/errors.js';
import type { JsonValue } from '../core/json.js';

/**
 * A response as a handler gives it to the idempotency layer, whatever the framework. The body is
 * bytes, sent as they are (`application/octet-stream` when no content type is given), or a JSON
 * value: sent as JSON text when the content type is JSON (the default when a value is given
 * without one), and sent as-is when it is a string with any other content type. Whatever the form,
 * it is turned into bytes once ({@link toWire}); those bytes are sent, stored and replayed.
 *
 * @example
 * ```ts
 * const created: HttpResponse = {
 *   status: 201,
 *   headers: { location: '/payments/p_1' },
 *   body: { id: 'p_1', amount: 1000, currency: 'EUR' },
 * };
 * ```
 */
export interface HttpResponse {
  /** The status code. */
  readonly status: number;
  /** Response headers; names are compared case-insensitively. */
  readonly headers?: Readonly<Record<string, string>>;
  /** The body: bytes, a JSON value, or a string for a content type that is not JSON. Absent: no body. */
  readonly body?: JsonValue | Uint8Array;
}

/** A response as it goes on the wire: lower-case header names, the body as bytes. */
export interface WireResponse {
  readonly status: number;
  readonly headers: Readonly<Record<string, string>>;
  /** The body's bytes, `undefined` for no body. */
  readonly body: Uint8Array | undefined;
}

/**
 * An answer as it is kept in the store (as JSON): the status, the stored headers and the exact
 * bytes of the body, as text when they are UTF-8 and as base64 (`encoding: 'base64'`) otherwise.
 * An answer not kept for replay (larger than `maxStoredBytes`, or a stream that was not kept) has
 * no body: `omittedBytes` says how big it was, `omittedBecause` why, and a retry gets
 * {@link AnswerNotKeptError} instead of a replay.
 */
export interface StoredAnswer {
  /** The format marker: answers stored by 0.1.0 have none. */
  readonly wire: 1;
  readonly status: number;
  readonly headers: Readonly<Record<string, string>>;
  /** The body as UTF-8 text, or as base64 when `encoding` says so; absent: no body. */
  readonly body?: string;
  readonly encoding?: 'base64';
  /**
   * The size of a body not kept, as far as it was sent when the key was recorded (a stream
   * recorded before its end is larger); the body itself is absent.
   */
  readonly omittedBytes?: number;
  /** Why the body was not kept; absent for one too large, the only reason earlier versions had. */
  readonly omittedBecause?: Exclude<NotKeptReason, 'too-large'>;
}

/**
 * Why an answer was recorded without a replayable body: `too-large`, its body was larger than
 * `maxStoredBytes`; `stream`, it was streamed with `storeStreams: false`; `unfinished`, the
 * client left before the stream ended, so the body was never whole; `still-open`, its stream was
 * still open after `streamRecordAfterSeconds`, so its key was recorded before its end.
 */
export type NotKeptReason = 'too-large' | 'stream' | 'unfinished' | 'still-open';

/**
 * An answer body that was sent but not kept: its size as far as it was sent when its key was
 * recorded (a stream recorded before its end goes on past it), and why.
 */
export interface NotKept {
  readonly bytes: number;
  readonly reason: NotKeptReason;
}

/** The response headers kept with a stored answer and replayed by default. */
export const DEFAULT_STORED_HEADERS: readonly string[] = [
  'content-type',
  'content-language',
  'content-location',
  'location',
  'etag',
  'last-modified',
  'link',
];

const JSON_TYPE = /^application\/(?:[\w.!#$&^-]+\+)?json\s*(?:;|$)/i;

/** Whether a content type is JSON (`application/json` or any `+json` suffix). */
function isJsonContentType(contentType: string): boolean {
  return JSON_TYPE.test(contentType);
}

/**
 * The same response with lower-case header names and, when it has a body but no content type,
 * `content-type: application/octet-stream` for bytes and `application/json` for a JSON value, so
 * the first answer and its replays look alike.
 */
function normalizeResponse(response: HttpResponse): HttpResponse {
  const headers: Record<string, string> = {};
  const given = response.headers ?? {};
  // Keys rather than entries: no [name, value] pair is built per header of every answer.
  for (const name of Object.keys(given)) headers[name.toLowerCase()] = given[name] as string;
  if (response.body !== undefined && headers['content-type'] === undefined) {
    headers['content-type'] =
      response.body instanceof Uint8Array
        ? 'application/octet-stream'
        : 'application/json; charset=utf-8';
  }
  return response.body === undefined
    ? { status: response.status, headers }
    : { status: response.status, headers, body: response.body };
}

// What goes on the wire for a body: bytes as they are, a string as-is unless the content type is
// JSON, anything else as JSON text.
function wireBody(body: JsonValue | Uint8Array, contentType: string): Uint8Array {
  if (body instanceof Uint8Array) return body;
  const text =
    typeof body === 'string' && !isJsonContentType(contentType) ? body : JSON.stringify(body);
  return Buffer.from(text, 'utf8');
}

/**
 * Renders a response for the wire: lower-case header names, the body as bytes (bytes as they are,
 * JSON text for a JSON value, the string itself for a string of another content type).
 */
export function toWire(response: HttpResponse): WireResponse {
  const normalized = normalizeResponse(response);
  const headers = normalized.headers ?? {};
  const { body } = normalized;
  return {
    status: normalized.status,
    headers,
    body: body === undefined ? undefined : wireBody(body, headers['content-type'] ?? ''),
  };
}

/** Response headers as Node and Fastify keep them (a number, repeated values as an array). */
export type OutgoingHeaders = Readonly<
  Record<string, number | string | readonly string[] | undefined>
>;

/**
 * Node's and Fastify's response headers as an answer carries them: lower-case names, one string
 * each (repeated values joined with `, `).
 */
export function flattenHeaders(headers: OutgoingHeaders): Record<string, string> {
  const flat: Record<string, string> = {};
  for (const name of Object.keys(headers)) {
    const value = headers[name];
    if (value !== undefined) {
      flat[name.toLowerCase()] = Array.isArray(value) ? value.join(', ') : String(value);
    }
  }
  return flat;
}

/**
 * The headers an answer of the layer (a replay, a problem) goes out with: those the app set before
 * the layer ran (CORS, a request id), under the answer's own; none a handler set since.
 */
export function answerHeaders(
  before: OutgoingHeaders,
  answer: WireResponse,
): Record<string, number | string | readonly string[]> {
  const headers: Record<string, number | string | readonly string[]> = {};
  for (const [name, value] of Object.entries(before)) {
    if (value !== undefined) headers[name.toLowerCase()] = value;
  }
  return { ...headers, ...answer.headers };
}

const utf8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });

/** The bytes as text when they are valid UTF-8, else `undefined`. */
export function utf8Text(bytes: Uint8Array): string | undefined {
  try {
    return utf8.decode(bytes);
  } catch {
    return undefined;
  }
}

function base64(bytes: Uint8Array): string {
  return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString('base64');
}

// Kept whatever `storedHeaders` says: without them the stored bytes mean nothing (a route that
// compresses its own answer stores the compressed bytes, which only Content-Encoding explains).
const DESCRIBE_BYTES: ReadonlySet<string> = new Set(['content-type', 'content-encoding']);

/**
 * What is stored of an answer on the wire: its status, its content type and encoding, the headers
 * in `storedHeaders`, and the exact bytes of its body (text when they are UTF-8, base64 otherwise),
 * or only their size when there are more than `maxStoredBytes` of them or `notKept` says the body
 * was not kept (a stream).
 */
export function toStoredAnswer(
  wire: WireResponse,
  storedHeaders: ReadonlySet<string>,
  maxStoredBytes: number,
  notKept?: NotKept,
): StoredAnswer {
  const headers: Record<string, string> = {};
  const sent = wire.headers;
  for (const name of Object.keys(sent)) {
    if (storedHeaders.has(name) || DESCRIBE_BYTES.has(name)) headers[name] = sent[name] as string;
  }
  const { status, body } = wire;
  if (notKept !== undefined) {
    const { bytes, reason } = notKept;
    return reason === 'too-large'
      ? { wire: 1, status, headers, omittedBytes: bytes }
      : { wire: 1, status, headers, omittedBytes: bytes, omittedBecause: reason };
  }
  if (body === undefined) return { wire: 1, status, headers };
  if (body.byteLength > maxStoredBytes) {
    return { wire: 1, status, headers, omittedBytes: body.byteLength };
  }
  const text = utf8Text(body);
  return text === undefined
    ? { wire: 1, status, headers, body: base64(body), encoding: 'base64' }
    : { wire: 1, status, headers, body: text };
}

const BASE64 = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/;

type Fields = Partial<Record<'wire' | 'status' | 'headers' | 'body' | 'encoding', unknown>> & {
  omittedBytes?: unknown;
  omittedBecause?: unknown;
};

function hasHeaders(headers: unknown): headers is Record<string, string> {
  return (
    typeof headers === 'object' &&
    headers !== null &&
    Object.values(headers).every((header) => typeof header === 'string')
  );
}

const STREAM_REASONS: ReadonlySet<unknown> = new Set<NotKeptReason>([
  'stream',
  'unfinished',
  'still-open',
]);

/** What was not kept of this stored answer, or `undefined` when it replays. */
export function notKeptOf(stored: unknown): NotKept | undefined {
  const { wire, omittedBytes, omittedBecause } = (stored ?? {}) as Fields;
  if (wire !== 1 || typeof omittedBytes !== 'number') return undefined;
  const reason = STREAM_REASONS.has(omittedBecause)
    ? (omittedBecause as NotKeptReason)
    : 'too-large';
  return { bytes: omittedBytes, reason };
}

/**
 * The bytes a stored answer replays, from this version's form ({@link StoredAnswer}) or 0.1.0's
 * (a JSON body kept as the value, a `text/*` body as the string, anything else as base64 marked
 * `encoding: 'base64'`), which are sent as 0.1.0 sent them.
 *
 * @throws {@link SchemaMismatchError} for a value that is neither, e.g. a store shared with other
 * code
 */
export function fromStoredAnswer(key: string, stored: unknown): WireResponse {
  const { wire, status, headers, body, encoding } = (stored ?? {}) as Fields;
  const bodyOk =
    body === undefined ||
    (encoding === 'base64'
      ? typeof body === 'string' && BASE64.test(body)
      : encoding === undefined);
  if (
    typeof stored !== 'object' ||
    stored === null ||
    typeof status !== 'number' ||
    !hasHeaders(headers) ||
    !bodyOk ||
    (wire !== undefined && wire !== 1) ||
    (wire === 1 && body !== undefined && typeof body !== 'string')
  ) {
    throw new SchemaMismatchError(
      `the stored answer of ${JSON.stringify(key)} is not an HTTP response; is the store shared with other code?`,
    );
  }
  if (body === undefined) return { status, headers, body: undefined };
  if (encoding === 'base64') {
    return { status, headers, body: new Uint8Array(Buffer.from(body as string, 'base64')) };
  }
  // This version's text, or 0.1.0's JSON value or text, rendered as 0.1.0 rendered it.
  if (wire === 1) return { status, headers, body: Buffer.from(body as string, 'utf8') };
  return toWire({ status, headers, body: body as JsonValue });
}
