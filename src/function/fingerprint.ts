import { canonicalJson } from '../core/canonical-json.js';
import { InvalidFingerprintError } from '../core/errors.js';
import { type IgnoredMembers, withoutIgnored } from '../core/json-pointer.js';
import { type MemberFingerprint, memberFingerprint } from '../core/member-digests.js';
import { sha256Hex } from '../core/sha256.js';

function refuse(reason: string): never {
  throw new InvalidFingerprintError(
    `the payload cannot be fingerprinted as canonical JSON: ${reason}`,
  );
}

/**
 * The default payload fingerprint: the SHA-256 (hex) of the RFC 8785 canonical JSON of `payload`,
 * as `JSON.stringify` sees it (`toJSON` applied, `undefined` and functions left out). Object keys
 * are sorted and numbers written one way, so `{ a: 1, b: 2 }` and `{ b: 2, a: 1 }` are the same
 * payload. The payload is a JavaScript value, so a number is a double: `0.1 + 0.2` and
 * `0.30000000000000004` are one payload, and so are two texts your code parsed to one double
 * (fingerprint the text instead when its digits matter). A BigInt is refused rather than
 * guessed at (`1n` is not the number `1`, and JSON has no form for it): pass it as a string
 * (`String(id)`) to make it part of the payload. A string with a lone surrogate counts with it
 * escaped, so it never meets another string. A payload JSON drops entirely (`undefined`, a
 * function) counts as the empty text, the same as calling with no payload.
 *
 * @example
 * ```ts
 * payloadFingerprint({ a: 1, b: 2 }) === payloadFingerprint({ b: 2, a: 1 }); // true
 * ```
 * @throws {@link InvalidFingerprintError} for a payload canonical JSON cannot represent (NaN,
 * ±Infinity, a cycle, a BigInt)
 */
export function payloadFingerprint(payload: unknown): string {
  return sha256Hex(canonicalPayload(payload) ?? '');
}

// The canonical JSON text of a payload, or `undefined` for one JSON drops entirely.
function canonicalPayload(payload: unknown): string | undefined {
  const dropped =
    payload === undefined || typeof payload === 'function' || typeof payload === 'symbol';
  return dropped ? undefined : canonicalJson(payload, refuse);
}

/**
 * The fingerprint `makeIdempotent` keeps with a key: {@link payloadFingerprint}'s digest, computed
 * with the members `ignored` names left out of the payload, and the digests of the payload's
 * top-level members (when it is an object), so a key reused with another payload can name the
 * members that differ. Without `ignored` the digest is `payloadFingerprint`'s.
 *
 * @throws {@link InvalidFingerprintError} as {@link payloadFingerprint} does
 */
export function keptPayloadFingerprint(
  payload: unknown,
  ignored: IgnoredMembers | undefined,
): MemberFingerprint {
  const canonical = canonicalPayload(payload);
  if (canonical === undefined) return { digest: sha256Hex(''), members: undefined };
  const shaped = ignored === undefined ? canonical : withoutIgnored(canonical, ignored);
  return memberFingerprint(sha256Hex(shaped), shaped);
}
