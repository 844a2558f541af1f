import { IDEMPOTENCY_KEY_HEADER } from './key.js';

/** Header values as Node and Hono give them: lower-case names, repeated headers as arrays. */
export type HeaderValues = Readonly<Record<string, string | readonly string[] | undefined>>;

/**
 * A request as the idempotency layer sees it, whatever the framework.
 *
 * @example
 * ```ts
 * const request: IdempotentRequest = {
 *   method: 'POST',
 *   path: '/payments',
 *   headers: { 'idempotency-key': '"order-42"' },
 *   body: { amount: 1000, currency: 'EUR' },
 *   scope: 'client-7',
 * };
 * ```
 */
export interface IdempotentRequest {
  /** The HTTP method; compared case-insensitively. */
  readonly method: string;
  /** The path, without the query string. Part of the default fingerprint. */
  readonly path: string;
  /** The request headers, names in lower case. */
  readonly headers: HeaderValues;
  /** The parsed body (usually JSON). Part of the default fingerprint. */
  readonly body?: unknown;
  /**
   * Who the key belongs to, e.g. the authenticated client. Keys of different scopes never meet:
   * one client cannot replay another's answer. `undefined` means unscoped.
   */
  readonly scope?: string | undefined;
}

/**
 * Node's request headers with every `Idempotency-Key` line kept apart: Node joins repeated lines
 * into one value, and the layer must see that the header came more than once to refuse it.
 *
 * @param headers - `req.headers`
 * @param rawHeaders - `req.rawHeaders`: names and values as they came, alternating
 */
export function nodeHeaders(headers: HeaderValues, rawHeaders: readonly string[]): HeaderValues {
  const lines: string[] = [];
  for (let index = 0; index < rawHeaders.length; index += 2) {
    if (rawHeaders[index]?.toLowerCase() === IDEMPOTENCY_KEY_HEADER) {
      lines.push(rawHeaders[index + 1] ?? '');
    }
  }
  return lines.length > 1 ? { ...headers, [IDEMPOTENCY_KEY_HEADER]: lines } : headers;
}
