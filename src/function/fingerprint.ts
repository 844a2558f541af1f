import { createHash } from 'node:crypto';
import canonicalize from 'canonicalize';
import { InvalidDigestError } from '../core/errors.js';

/**
 * The default payload fingerprint: the SHA-256 (hex) of the RFC 8785 canonical JSON of `payload`.
 * Object keys are sorted and numbers written one way, so `{ a: 1, b: 2 }` and `{ b: 2, a: 1 }` are
 * the same payload.
 *
 * @example
 * ```ts
 * payloadFingerprint({ a: 1, b: 2 }) === payloadFingerprint({ b: 2, a: 1 }); // true
 * ```
 * @throws {@link InvalidDigestError} for a payload canonical JSON cannot represent (NaN,
 * ±Infinity, a cycle, a BigInt, a lone surrogate)
 */
export function payloadFingerprint(payload: unknown): string {
  let text: string | undefined;
  try {
    text = canonicalize(payload);
  } catch (error) {
    throw new InvalidDigestError(
      `the payload cannot be fingerprinted as canonical JSON: ${(error as Error).message}`,
    );
  }
  // canonicalize gives undefined for a payload JSON drops entirely (undefined, a function):
  // fingerprinted as the empty text, the same as calling with no payload.
  return createHash('sha256')
    .update(text ?? '')
    .digest('hex');
}
