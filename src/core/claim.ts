import type { ClaimSettings } from './claim-options.js';
import { type Encryption, encryptionOf, keyedFingerprintKeyId } from './encryption.js';
import {
  differentMembers,
  type Fingerprint,
  keptFingerprint,
  type MemberDifference,
  readKeptFingerprint,
} from './member-digests.js';
import { type Ownership, ownership } from './ownership.js';
import type { IdempotencyRecord, LeasedIdempotencyStore } from './store.js';
import { isThenable } from './thenable.js';
import { waitForOwner } from './wait.js';

/**
 * What the claim engine decided for a key and a fingerprint. The HTTP layer maps each to an answer
 * or a problem, `makeIdempotent` to a result or an error; both share the codes of `ErrorCode`.
 *
 * - `acquired`: the caller owns the key and runs the work under its {@link Ownership};
 * - `replay`: the key's answer is stored and within its retention: send it, run nothing;
 * - `expired`: the key's answer is past its retention but not purged: neither replayed nor run;
 * - `mismatch`: the key holds another fingerprint's row: nothing runs; `members` names the
 *   top-level members that differ, when both requests kept member digests;
 * - `outcomeUnknown`: the key is marked unrecorded (its work declared its outcome unknown, or ran
 *   without its answer being recorded): it waits for an operator, and nothing runs;
 * - `inProgress`: another owner still works on it once any wait ran out. `record` is the row as
 *   last seen (`null` when none was read), `leaseUntil` when its lease lapses at the latest (`null`
 *   without a lease).
 */
export type Claim =
  | { readonly status: 'acquired'; readonly ownership: Ownership }
  | { readonly status: 'replay'; readonly record: IdempotencyRecord<unknown> }
  | { readonly status: 'expired'; readonly record: IdempotencyRecord<unknown> }
  | {
      readonly status: 'mismatch';
      readonly record: IdempotencyRecord<unknown>;
      readonly members?: MemberDifference;
    }
  | { readonly status: 'outcomeUnknown' }
  | {
      readonly status: 'inProgress';
      readonly record: IdempotencyRecord<unknown> | null;
      readonly leaseUntil: number | null;
    };

// One try at the key: what the store holds for it now. `unrecorded` says waiting is pointless.
type Attempt =
  | Extract<Claim, { status: 'acquired' }>
  | { readonly status: 'settled'; readonly record: IdempotencyRecord<unknown> }
  | {
      readonly status: 'inProgress';
      readonly record: IdempotencyRecord<unknown> | null;
      readonly leaseUntil: number | null;
      readonly unrecorded: boolean;
    };

async function attempt(
  store: LeasedIdempotencyStore<unknown>,
  key: string,
  fingerprint: string,
  now: number,
  settings: ClaimSettings,
): Promise<Attempt> {
  // One atomic acquire: it reads first, and writes only to insert the key or to take over a
  // lapsed lease (same fingerprint only), handing out a new fencing token.
  const got = await store.acquire(key, fingerprint, {
    expires: now + settings.ttlSeconds,
    now,
    leaseSeconds: settings.leaseSeconds,
    replaceExpired: settings.replaceExpired,
  });
  switch (got.status) {
    case 'acquired': {
      const owner = { key, fingerprint, fencingToken: got.fencingToken };
      return { status: 'acquired', ownership: ownership(store, owner, got.takenOver, settings) };
    }
    case 'inProgress':
      return {
        status: 'inProgress',
        record: null,
        leaseUntil: got.leaseUntil,
        unrecorded: got.unrecorded,
      };
    default:
      return { status: 'settled', record: got.record };
  }
}

// A row that is done or holds another fingerprint, judged at `now`.
function settle(record: IdempotencyRecord<unknown>, fingerprint: string, now: number): Claim {
  if (record.fingerprint !== fingerprint) return { status: 'mismatch', record };
  return { status: record.expires > now ? 'replay' : 'expired', record };
}

/**
 * The claim protocol, once for the HTTP layer and `makeIdempotent`: claims `key` for `fingerprint`
 * on `store`, or says why not, with one `acquire` per try (which reads first, so a replay writes
 * nothing). A key in progress is waited
 * for up to `waitTimeoutMs` with reads only ({@link waitForOwner}); only a row that is gone or
 * whose lease lapsed is claimed again, a write.
 *
 * ```
 *  claim ── won ────────────────────────────▶ acquired (run under the Ownership)
 *    ├─ other fingerprint ──────────────────▶ mismatch
 *    ├─ done, expires > now ────────────────▶ replay
 *    ├─ done, expires <= now ───────────────▶ expired
 *    ├─ pending, marked unrecorded ─────────▶ outcomeUnknown (an operator settles it)
 *    └─ pending ─ wait (reads) ─┬─ gone or lapsed ─▶ claim again
 *                               ├─ settled ────────▶ mismatch / replay / expired
 *                               └─ time is up ─────▶ inProgress
 * ```
 *
 * @returns see {@link Claim}; throws what the store throws
 */
export async function claim(
  store: LeasedIdempotencyStore<unknown>,
  key: string,
  fingerprint: Fingerprint,
  settings: ClaimSettings,
): Promise<Claim> {
  const encryption = encryptionOf(store);
  const { digest, members } =
    typeof fingerprint === 'string' ? { digest: fingerprint, members: undefined } : fingerprint;
  // With encryption on the row keeps the keyed fingerprint, never the digest itself.
  const head = encryption === undefined ? digest : await encryption.fingerprint(digest);
  // Keyed only with encryption on: without it the members are kept as they are, and no promise
  // is made and awaited for them on every claim.
  const kept = (keyId: string | undefined) =>
    members === undefined || encryption === undefined || keyId === undefined
      ? members
      : keyedMembers(members, encryption, keyId);
  const current = kept(encryption?.current);
  const stored = keptFingerprint(head, isThenable(current) ? await current : current);
  const found = await claimAs(store, key, stored, settings);
  if (found.status !== 'mismatch') return found;
  // A row kept before encryption was turned on (the plain digest), under a key since rotated, or
  // before member digests were kept is still this request's: the claim is made again under the
  // fingerprint that row holds.
  const { head: keptHead, kept: keptMembers } =
    members === undefined
      ? { head: found.record.fingerprint, kept: undefined }
      : readKeptFingerprint(found.record.fingerprint);
  const same =
    encryption === undefined
      ? keptHead === digest
      : await encryption.fingerprintMatches(keptHead, digest);
  if (same) return claimAs(store, key, found.record.fingerprint, settings);
  if (keptMembers === undefined) return found;
  // This request's members, digested as the first request's were: under its key, or plain.
  const keyId = keyedFingerprintKeyId(keptHead);
  if (keyId !== undefined && encryption?.has(keyId) !== true) return found;
  const again = readKeptFingerprint(keptFingerprint(keptHead, await kept(keyId))).kept;
  if (again === undefined) return found;
  return { ...found, members: differentMembers(keptMembers, again) };
}

// Member digests keyed under `keyId`, as they are kept with encryption on.
async function keyedMembers(
  members: ReadonlyMap<string, string>,
  encryption: Encryption,
  keyId: string,
): Promise<ReadonlyMap<string, string>> {
  const keyed = new Map<string, string>();
  for (const [name, digest] of members) {
    keyed.set(name, await encryption.fingerprint(digest, keyId));
  }
  return keyed;
}

async function claimAs(
  store: LeasedIdempotencyStore<unknown>,
  key: string,
  fingerprint: string,
  settings: ClaimSettings,
): Promise<Claim> {
  const deadline = performance.now() + settings.waitTimeoutMs;
  for (;;) {
    const now = settings.now();
    const found = await attempt(store, key, fingerprint, now, settings);
    if (found.status === 'acquired') return found;
    if (found.status === 'settled') return settle(found.record, fingerprint, now);
    // Marked unrecorded: it waits for an operator, so waiting for it here is pointless.
    if (found.unrecorded) return { status: 'outcomeUnknown' };
    const waited = await waitForOwner({
      store,
      key,
      fingerprint,
      now: settings.now,
      deadline,
      intervalMs: settings.waitIntervalMs,
      seen: found.record,
    });
    if (waited.status === 'inProgress') {
      // The row as last seen, if the wait looked at it; else what the claim saw.
      const { record } = waited;
      return {
        status: 'inProgress',
        record,
        leaseUntil: record === null ? found.leaseUntil : record.leaseUntil,
      };
    }
    if (waited.status !== 'claim') return settle(waited.record, fingerprint, settings.now());
  }
}
