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

/** The first value of a header, or all values joined with `, ` as HTTP does for repeated lines. */
export function headerValue(headers: HeaderValues, name: string): string | undefined {
  const value = headers[name];
  return typeof value === 'string' || value === undefined ? value : value.join(', ');
}
