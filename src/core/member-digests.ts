import { topLevelMembers } from './json-pointer.js';
import { sha256Hex } from './sha256.js';
import { MAX_KEY_BYTES } from './validation.js';

/** The most top-level members whose digests are kept with a key. */
export const MAX_MEMBER_DIGESTS = 32;
// Hex characters kept of each member's digest: enough to tell members apart, and short enough
// that a body's members fit the fingerprint column's MAX_KEY_BYTES beside the fingerprint itself.
const MEMBER_DIGEST_HEX = 16;

/**
 * A request's fingerprint as the HTTP layer and `makeIdempotent` compute it: the digest of the
 * whole request, and the SHA-256 (hex) of each top-level member of its body (`undefined` when
 * the body is not a JSON object), so that a key reused with another body can say which members
 * differ. A fingerprint option of your own gives a plain string instead, without members.
 */
export interface MemberFingerprint {
  /** The digest of the whole request (method, path and body, or the payload). */
  readonly digest: string;
  /**
   * Member name → the SHA-256 (hex) of its canonical value text, for the first members by name
   * (one more than {@link MAX_MEMBER_DIGESTS} at most); `undefined` for a body that is no object.
   */
  readonly members: ReadonlyMap<string, string> | undefined;
}

/** What the claim engine is given: a plain fingerprint, or one with its members' digests. */
export type Fingerprint = string | MemberFingerprint;

/**
 * The {@link MemberFingerprint} of a digest and the canonical body text it covers.
 *
 * @param canonical - the canonical JSON text of the body, `undefined` for a body that is not JSON
 */
export function memberFingerprint(
  digest: string,
  canonical: string | undefined,
): MemberFingerprint {
  const members = canonical === undefined ? undefined : topLevelMembers(canonical);
  if (members === undefined) return { digest, members: undefined };
  // Canonical text lists members in name order, and only the first MAX_MEMBER_DIGESTS are kept:
  // one more is digested, so that `keptFingerprint` sees the body had more and says so.
  const digests = new Map<string, string>();
  for (const [name, value] of members) {
    if (digests.size > MAX_MEMBER_DIGESTS) break;
    digests.set(name, sha256Hex(value));
  }
  return { digest, members: digests };
}

/** The member digests kept with a key, as {@link readKeptFingerprint} reads them back. */
export interface KeptMembers {
  /** Member name → its (possibly keyed) digest, shortened. */
  readonly members: ReadonlyMap<string, string>;
  /** Whether the body had members beyond those kept (more than the cap, or too long to fit). */
  readonly capped: boolean;
}

// The kept form: the fingerprint, a space (which neither a hex digest nor a keyed fingerprint
// holds), then JSON: `{"members":{"amount":"…"},"capped":true}`.
const SEPARATOR = ' ';

/**
 * The value stored in the fingerprint column: `head` (the digest, or its keyed form), then the
 * member digests, name order, as many as fit {@link MAX_MEMBER_DIGESTS} and the column's
 * `MAX_KEY_BYTES`; a body with more is marked `capped`.
 *
 * @param members - member name → digest, already keyed when encryption is on
 */
export function keptFingerprint(
  head: string,
  members: ReadonlyMap<string, string> | undefined,
): string {
  if (members === undefined) return head;
  const names = [...members.keys()].sort();
  const kept: Record<string, string> = {};
  // What the JSON around the members costs, `,"capped":true` included.
  let used =
    Buffer.byteLength(head, 'utf8') + SEPARATOR.length + '{"members":{},"capped":true}'.length;
  let count = 0;
  for (const name of names) {
    // What `"name":"<digest>",` takes, counted without writing it out.
    const bytes = Buffer.byteLength(JSON.stringify(name), 'utf8') + MEMBER_DIGEST_HEX + 4;
    if (count === MAX_MEMBER_DIGESTS || used + bytes > MAX_KEY_BYTES) break;
    kept[name] = (members.get(name) as string).slice(-MEMBER_DIGEST_HEX);
    used += bytes;
    count++;
  }
  const capped = count < names.length;
  return `${head}${SEPARATOR}${JSON.stringify(capped ? { members: kept, capped } : { members: kept })}`;
}

/**
 * The parts of a stored fingerprint: its head (the digest, or its keyed form) and the member
 * digests kept with it, if any. A fingerprint of your own, or one stored by a release before
 * member digests, is all head.
 */
export function readKeptFingerprint(stored: string): {
  readonly head: string;
  readonly kept: KeptMembers | undefined;
} {
  const at = stored.indexOf(`${SEPARATOR}{"members":`);
  if (at < 0) return { head: stored, kept: undefined };
  try {
    const parsed = JSON.parse(stored.slice(at + 1)) as {
      members?: unknown;
      capped?: unknown;
    };
    const { members } = parsed;
    if (typeof members !== 'object' || members === null) throw new TypeError('no members');
    const map = new Map<string, string>();
    for (const [name, digest] of Object.entries(members)) {
      if (typeof digest === 'string') map.set(name, digest);
    }
    return { head: stored.slice(0, at), kept: { members: map, capped: parsed.capped === true } };
  } catch {
    return { head: stored, kept: undefined };
  }
}

/** Which top-level members differ between the first request and a reuse of its key. */
export interface MemberDifference {
  /** The names of the members that differ, sorted: changed, added or left out. Names only. */
  readonly names: readonly string[];
  /** Whether either body had members beyond the kept ones, which were not compared. */
  readonly capped: boolean;
}

// Whether `name` may be a member `side` had but did not keep: a capped side keeps a prefix of its
// names in sorted order, so only names after its last kept one are unknown.
function untracked(side: KeptMembers, name: string): boolean {
  if (!side.capped) return false;
  let last = '';
  for (const kept of side.members.keys()) if (kept > last) last = kept;
  return name > last;
}

/**
 * The members that differ between those kept with the first request and those of a reuse (both
 * shortened and keyed alike). A name kept on one side only differs, unless the other side is
 * capped and may have had it without keeping it.
 */
export function differentMembers(first: KeptMembers, again: KeptMembers): MemberDifference {
  const names = new Set([...first.members.keys(), ...again.members.keys()]);
  const differ: string[] = [];
  for (const name of names) {
    const before = first.members.get(name);
    const now = again.members.get(name);
    if (before === undefined && untracked(first, name)) continue;
    if (now === undefined && untracked(again, name)) continue;
    if (before !== now) differ.push(name);
  }
  return { names: differ.sort(), capped: first.capped || again.capped };
}
