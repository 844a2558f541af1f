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
  const names = sortedNames(members);
  const kept: string[] = [];
  const quoted: string[] = [];
  // What the JSON around the members costs, `,"capped":true` included.
  let used = utf8Length(head) + SEPARATOR.length + '{"members":{},"capped":true}'.length;
  for (const name of names) {
    const text = JSON.stringify(name);
    // Beside its quoted name, a member costs `:"`, its shortened digest and `",`.
    const bytes = utf8Length(text) + MEMBER_DIGEST_HEX + 4;
    if (kept.length === MAX_MEMBER_DIGESTS || used + bytes > MAX_KEY_BYTES) break;
    kept.push(name);
    quoted.push(text);
    used += bytes;
  }
  const capped = kept.length < names.length ? ',"capped":true' : '';
  return `${head}${SEPARATOR}{"members":${membersJson(members, kept, quoted)}${capped}}`;
}

// The kept members as the JSON object `JSON.stringify` would write, without building the object:
// written as text in name order, unless a name is an array index, which JavaScript orders first.
function membersJson(
  members: ReadonlyMap<string, string>,
  names: readonly string[],
  quoted: readonly string[],
): string {
  const digestOf = (name: string) => (members.get(name) as string).slice(-MEMBER_DIGEST_HEX);
  if (names.some(isArrayIndex)) {
    return JSON.stringify(Object.fromEntries(names.map((name) => [name, digestOf(name)])));
  }
  let text = '';
  for (let at = 0; at < names.length; at++) {
    const digest = JSON.stringify(digestOf(names[at] as string));
    text += `${at === 0 ? '' : ','}${quoted[at] as string}:${digest}`;
  }
  return `{${text}}`;
}

// The names in UTF-16 code unit order; those of `memberFingerprint` already are, and are not
// sorted again.
function sortedNames(members: ReadonlyMap<string, string>): string[] {
  const names = [...members.keys()];
  for (let at = 1; at < names.length; at++) {
    if ((names[at - 1] as string) > (names[at] as string)) return names.sort();
  }
  return names;
}

// A key JavaScript orders before the others: a canonical integer below 2^32 - 1.
function isArrayIndex(name: string): boolean {
  return /^(?:0|[1-9][0-9]{0,9})$/.test(name) && Number(name) < 2 ** 32 - 1;
}

// UTF-8 bytes of `text`: a name or a digest is nearly always ASCII, counted without a call out.
function utf8Length(text: string): number {
  for (let at = 0; at < text.length; at++) {
    if (text.charCodeAt(at) > 0x7f) return Buffer.byteLength(text, 'utf8');
  }
  return text.length;
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
