import type { ClaimSettings } from './claim-options.js';
import { encryptionOf } from './encryption.js';
import { type Ownership, ownership } from './ownership.js';
import type { IdempotencyRecord, LeasedIdempotencyStore } from './store.js';
import { waitForOwner } from './wait.js';

/**
 * What the claim engine decided for a key and a fingerprint. The HTTP layer maps each to an answer
 * or a problem, `makeIdempotent` to a result or an error; both share the codes of `ErrorCode`.
 *
 * - `acquired`: the caller owns the key and runs the work under its {@link Ownership};
 * - `replay`: the key's answer is stored and within its retention: send it, run nothing;
 * - `expired`: the key's answer is past its retention but not purged: neither replayed nor run;
 * - `mismatch`: the key holds another fingerprint's row: nothing runs;
 * - `outcomeUnknown`: the key is marked unrecorded (its work declared its outcome unknown, or ran
 *   without its answer being recorded): it waits for an operator, and nothing runs;
 * - `inProgress`: another owner still works on it once any wait ran out. `record` is the row as last seen (`null` when none was
 *   read), `leaseUntil` when its lease lapses at the latest (`null` without a lease).
 */
export type Claim =
  | { readonly status: 'acquired'; readonly ownership: Ownership }
  | { readonly status: 'replay'; readonly record: IdempotencyRecord<unknown> }
  | { readonly status: 'expired'; readonly record: IdempotencyRecord<unknown> }
  | { readonly status: 'mismatch'; readonly record: IdempotencyRecord<unknown> }
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
 * The claim protocol, once for the HTTP layer and `makeIdempotent`: claims `key` for `fingerprint` on
 * `store`, or says why not, with one `acquire` per try (which reads first, so a replay writes
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
  fingerprint: string,
  settings: ClaimSettings,
): Promise<Claim> {
  const encryption = encryptionOf(store);
  if (encryption === undefined) return claimAs(store, key, fingerprint, settings);
  // With encryption on the row keeps the keyed fingerprint, never the digest itself. A row kept
  // before encryption was turned on (the plain digest) or under a key since rotated is still this
  // request's: the claim is made again under the fingerprint that row holds.
  const found = await claimAs(store, key, await encryption.fingerprint(fingerprint), settings);
  if (found.status !== 'mismatch') return found;
  const kept = found.record.fingerprint;
  if (!(await encryption.fingerprintMatches(kept, fingerprint))) return found;
  return claimAs(store, key, kept, settings);
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
