import { UnserializableResponseError } from '../core/errors.js';
import { type JsonValue, serializeResponse } from '../core/json.js';

/**
 * A response as the idempotency layer sees it, whatever the framework. The body is bytes, sent
 * as they are (`application/octet-stream` when no content type is given), or a JSON value: sent as
 * JSON text when the content type is JSON (the default when a value is given without one), and
 * sent as-is when it is a string with any other content type.
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

/** A response on its way to the wire: lower-case header names, the body as text or bytes. */
export interface WireResponse {
  readonly status: number;
  readonly headers: Readonly<Record<string, string>>;
  /** The body text or bytes, `undefined` for no body. */
  readonly body: string | Uint8Array | undefined;
}

/**
 * An answer as it is kept in the store (as JSON): its status, the stored headers and its body.
 * JSON bodies are kept as the value and `text/*` bodies as the string; any other body is kept as
 * the base64 text of the bytes that were sent, marked `encoding: 'base64'`, and replayed as those
 * bytes.
 */
export type StoredResponse =
  | {
      readonly status: number;
      readonly headers: Readonly<Record<string, string>>;
      /** The body itself; absent: no body. */
      readonly body?: JsonValue;
      readonly encoding?: undefined;
    }
  | {
      readonly status: number;
      readonly headers: Readonly<Record<string, string>>;
      /** The base64 text of the body's bytes. */
      readonly body: string;
      readonly encoding: 'base64';
    };

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
const TEXT_TYPE = /^text\//i;

/** Whether a content type is JSON (`application/json` or any `+json` suffix). */
export function isJsonContentType(contentType: string): boolean {
  return JSON_TYPE.test(contentType);
}

/**
 * The same response with lower-case header names and, when it has a body but no content type,
 * `content-type: application/octet-stream` for bytes and `application/json` for a JSON value, so
 * the first answer and its replays look alike.
 */
export function normalizeResponse(response: HttpResponse): HttpResponse {
  const headers: Record<string, string> = {};
  for (const [name, value] of Object.entries(response.headers ?? {})) {
    headers[name.toLowerCase()] = value;
  }
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
function wireBody(body: JsonValue | Uint8Array, contentType: string): string | Uint8Array {
  if (body instanceof Uint8Array) return body;
  return typeof body === 'string' && !isJsonContentType(contentType) ? body : JSON.stringify(body);
}

/**
 * Renders a normalized response for the wire: bytes as they are, JSON text for a JSON content
 * type, the string itself otherwise.
 */
export function toWire(response: HttpResponse): WireResponse {
  const normalized = normalizeResponse(response);
  const headers = normalized.headers ?? {};
  const { body } = normalized;
  if (body === undefined) return { status: normalized.status, headers, body: undefined };
  return {
    status: normalized.status,
    headers,
    body: wireBody(body, headers['content-type'] ?? ''),
  };
}

/**
 * The part of a normalized response that is stored: its status, its content type, the headers in
 * `storedHeaders` and its body. A JSON body is kept as the value and a `text/*` string as the
 * string; any other body is kept as the base64 text of the bytes {@link toWire} sends, so every
 * answer a handler can give is replayed as it was sent.
 *
 * @throws {@link UnserializableResponseError} for a status that is not an integer 200–599, or a
 * body with a JSON content type that JSON cannot represent
 */
export function toStoredResponse(
  response: HttpResponse,
  storedHeaders: ReadonlySet<string>,
): StoredResponse {
  const { status, body } = response;
  if (!Number.isInteger(status) || status < 200 || status > 599) {
    throw new UnserializableResponseError('$.status', `the status ${String(status)}`);
  }
  const headers: Record<string, string> = {};
  for (const [name, value] of Object.entries(response.headers ?? {})) {
    // The content type is always kept: it decides how the stored body is sent again.
    if (storedHeaders.has(name) || name === 'content-type') headers[name] = value;
  }
  if (body === undefined) return { status, headers };
  const contentType = headers['content-type'] ?? '';
  if (!(body instanceof Uint8Array)) {
    if (isJsonContentType(contentType)) {
      serializeResponse(body);
      return { status, headers, body };
    }
    if (TEXT_TYPE.test(contentType) && typeof body === 'string') return { status, headers, body };
  }
  const bytes = wireBody(body, contentType);
  const base64 =
    typeof bytes === 'string'
      ? Buffer.from(bytes, 'utf8').toString('base64')
      : Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString('base64');
  return { status, headers, body: base64, encoding: 'base64' };
}

const BASE64 = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/;

/** Whether a stored value has the shape {@link toStoredResponse} writes. */
export function isStoredResponse(value: unknown): value is StoredResponse {
  if (typeof value !== 'object' || value === null) return false;
  const { status, headers, body, encoding } = value as {
    status?: unknown;
    headers?: unknown;
    body?: unknown;
    encoding?: unknown;
  };
  return (
    typeof status === 'number' &&
    typeof headers === 'object' &&
    headers !== null &&
    Object.values(headers).every((header) => typeof header === 'string') &&
    (encoding === undefined ||
      (encoding === 'base64' && typeof body === 'string' && BASE64.test(body)))
  );
}

/** The response a stored answer replays: its bytes again for a body stored as base64. */
export function fromStoredResponse(stored: StoredResponse): HttpResponse {
  const { status, headers } = stored;
  if (stored.encoding === 'base64') {
    return { status, headers, body: new Uint8Array(Buffer.from(stored.body, 'base64')) };
  }
  return stored.body === undefined ? { status, headers } : { status, headers, body: stored.body };
}

const utf8 = new TextDecoder('utf-8', { fatal: true });

/**
 * Turns an answer captured from a framework (status, headers, the bytes it sent) into an
 * {@link HttpResponse}: a JSON content type is parsed, a `text/*` one decoded as UTF-8, and
 * anything else (binary, or bytes that do not decode) is kept as the bytes.
 */
export function fromCapturedAnswer(
  status: number,
  headers: Readonly<Record<string, string>>,
  bytes: Uint8Array,
): HttpResponse {
  if (bytes.byteLength === 0) return normalizeResponse({ status, headers });
  const response = normalizeResponse({ status, headers, body: bytes });
  const contentType = response.headers?.['content-type'] ?? '';
  try {
    if (isJsonContentType(contentType)) {
      return { ...response, body: JSON.parse(utf8.decode(bytes)) as JsonValue };
    }
    if (TEXT_TYPE.test(contentType)) return { ...response, body: utf8.decode(bytes) };
  } catch {
    // Not UTF-8, or not the JSON its content type claims: kept as the bytes that were sent.
  }
  return response;
}
