import { createHash } from 'node:crypto';
import canonicalize from 'canonicalize';
import { InvalidDigestError } from '../core/errors.js';
import type { IdempotentRequest } from './request.js';

/**
 * The default request fingerprint: the SHA-256 (hex) of the RFC 8785 canonical JSON of
 * `{ method, path, body }`, with the method in upper case. Canonical JSON sorts object keys and
 * writes numbers one way, so a body with its keys reordered (or `1.0` for `1`) is the same request.
 * Headers and the query string are not part of it; pass your own `fingerprint` option to add them.
 *
 * @example
 * ```ts
 * requestFingerprint({ method: 'POST', path: '/payments', headers: {}, body: { a: 1, b: 2 } }) ===
 *   requestFingerprint({ method: 'post', path: '/payments', headers: {}, body: { b: 2, a: 1 } }); // true
 * ```
 * @throws {@link InvalidDigestError} for a body canonical JSON cannot represent (NaN, ±Infinity,
 * a cycle, a lone surrogate); a body parsed from JSON never is one
 */
export function requestFingerprint(request: IdempotentRequest): string {
  let text: string | undefined;
  try {
    text = canonicalize({
      method: request.method.toUpperCase(),
      path: request.path,
      body: request.body,
    });
  } catch (error) {
    throw new InvalidDigestError(
      `the request body cannot be fingerprinted as canonical JSON: ${(error as Error).message}`,
    );
  }
  return createHash('sha256')
    .update(text ?? '')
    .digest('hex');
}
