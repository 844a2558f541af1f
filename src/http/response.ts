import { UnserializableResponseError } from '../core/errors.js';
import { type JsonValue, serializeResponse } from '../core/json.js';

/**
 * A response as the idempotency layer sees it, whatever the framework. The body is a JSON value:
 * sent as JSON text when the content type is JSON (the default when a body is given without one),
 * and sent as-is when it is a string with a `text/*` content type.
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
  /** The body: a JSON value, or a string for a `text/*` content type. Absent: no body. */
  readonly body?: JsonValue;
}

/** A response on its way to the wire: lower-case header names, the body as text. */
export interface WireResponse {
  readonly status: number;
  readonly headers: Readonly<Record<string, string>>;
  /** The body text, `undefined` for no body. */
  readonly body: string | undefined;
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
const TEXT_TYPE = /^text\//i;

/** Whether a content type is JSON (`application/json` or any `+json` suffix). */
export function isJsonContentType(contentType: string): boolean {
  return JSON_TYPE.test(contentType);
}

/**
 * The same response with lower-case header names and, when it has a body but no content type,
 * `content-type: application/json`, so the first answer and its replays look alike.
 */
export function normalizeResponse(response: HttpResponse): HttpResponse {
  const headers: Record<string, string> = {};
  for (const [name, value] of Object.entries(response.headers ?? {})) {
    headers[name.toLowerCase()] = value;
  }
  if (response.body !== undefined && headers['content-type'] === undefined) {
    headers['content-type'] = 'application/json; charset=utf-8';
  }
  return response.body === undefined
    ? { status: response.status, headers }
    : { status: response.status, headers, body: response.body };
}

/**
 * Renders a normalized response for the wire: JSON text for a JSON content type, the string itself
 * otherwise.
 */
export function toWire(response: HttpResponse): WireResponse {
  const normalized = normalizeResponse(response);
  const headers = normalized.headers ?? {};
  const { body } = normalized;
  if (body === undefined) return { status: normalized.status, headers, body: undefined };
  const contentType = headers['content-type'] ?? '';
  const text =
    typeof body === 'string' && !isJsonContentType(contentType) ? body : JSON.stringify(body);
  return { status: normalized.status, headers, body: text };
}

/**
 * The part of a normalized response that is stored: its status, its content type, the headers in
 * `storedHeaders` and its body. Refuses what a replay could not reproduce exactly.
 *
 * @throws {@link UnserializableResponseError} for a status that is not an integer 200–599, a body
 * JSON cannot represent, or a non-string body with a content type that is not JSON or text
 */
export function toStoredResponse(
  response: HttpResponse,
  storedHeaders: ReadonlySet<string>,
): HttpResponse {
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
  serializeResponse(body);
  const contentType = headers['content-type'] ?? '';
  if (
    !isJsonContentType(contentType) &&
    !(TEXT_TYPE.test(contentType) && typeof body === 'string')
  ) {
    throw new UnserializableResponseError(
      '$.body',
      `a body with content type ${JSON.stringify(contentType)} (only JSON and text bodies are stored)`,
    );
  }
  return { status, headers, body };
}

/** Whether a stored value has the shape {@link toStoredResponse} writes. */
export function isStoredResponse(value: unknown): value is HttpResponse {
  if (typeof value !== 'object' || value === null) return false;
  const { status, headers } = value as { status?: unknown; headers?: unknown };
  return (
    typeof status === 'number' &&
    typeof headers === 'object' &&
    headers !== null &&
    Object.values(headers).every((header) => typeof header === 'string')
  );
}

const utf8 = new TextDecoder('utf-8', { fatal: true });

/**
 * Turns an answer captured from a framework (status, headers, the bytes it sent) into an
 * {@link HttpResponse}: a JSON content type is parsed, a `text/*` one decoded as UTF-8. Anything
 * else (binary, or bytes that do not decode) gives `body` as `undefined` and `storable: false`.
 */
export function fromCapturedAnswer(
  status: number,
  headers: Readonly<Record<string, string>>,
  bytes: Uint8Array,
): { response: HttpResponse; storable: boolean } {
  const normalized = normalizeResponse({ status, headers });
  if (bytes.byteLength === 0) return { response: normalized, storable: true };
  const contentType = normalized.headers?.['content-type'] ?? '';
  try {
    const text = utf8.decode(bytes);
    if (isJsonContentType(contentType)) {
      return { response: { ...normalized, body: JSON.parse(text) as JsonValue }, storable: true };
    }
    if (TEXT_TYPE.test(contentType))
      return { response: { ...normalized, body: text }, storable: true };
  } catch {
    // Not UTF-8, or not the JSON its content type claims: it cannot be replayed faithfully.
  }
  return { response: normalized, storable: false };
}
