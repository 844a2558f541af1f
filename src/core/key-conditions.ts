import {
  and,
  type Column,
  eq,
  gt,
  isNull,
  lte,
  or,
  type SQL,
  type SQLWrapper,
  sql,
} from 'drizzle-orm';
import { KeyStatus } from './status.js';

/** The columns of a keys table that the stores' conditions read, on any dialect. */
export interface KeyColumns {
  readonly id: Column;
  readonly fingerprint: Column;
  readonly status: Column;
  readonly expires: Column;
  readonly attempt: Column;
  readonly unrecorded: Column;
}

/** A value a condition compares with: a literal, or a placeholder of a prepared statement. */
export type Bound<T> = T | SQLWrapper;

/**
 * The done rows whose deadline has passed at `now`: all that retention (`expired`, `purge`,
 * `sweepBatch`) may ever select. A pending row belongs to its worker, whatever its `expires` says.
 */
export function expiredAnswer(
  keys: Pick<KeyColumns, 'status' | 'expires'>,
  now: Bound<number>,
): SQL {
  return and(eq(keys.status, KeyStatus.done), lte(keys.expires, now)) as SQL;
}

/**
 * The done row of `key` whose answer may still be replayed at `now` (`expires > now`): what
 * `fetch` reads.
 */
export function liveAnswer(
  keys: Pick<KeyColumns, 'id' | 'status' | 'expires'>,
  key: Bound<string>,
  now: Bound<number>,
): SQL {
  return and(eq(keys.id, key), eq(keys.status, KeyStatus.done), gt(keys.expires, now)) as SQL;
}

/**
 * Among pending rows, those that need an operator's look at `now`: marked unrecorded, their lease
 * lapsed, or without a lease and past their retention deadline (see `isStale`). What
 * `pendingKeys({ stale: true })` lists.
 */
export function stalePending(
  keys: Pick<KeyColumns, 'unrecorded' | 'expires'> & { readonly leaseUntil: Column },
  now: Bound<number>,
): SQL {
  return or(
    eq(keys.unrecorded, true),
    lte(keys.leaseUntil, now),
    and(isNull(keys.leaseUntil), lte(keys.expires, now)),
  ) as SQL;
}

/**
 * The pending row of `key` an operator releases, whatever its lease and token: of `fingerprint`
 * when that is not NULL, of any fingerprint when it is. `fingerprint` is a placeholder bound to a
 * text or NULL (typed where the dialect needs a NULL typed, e.g. `::text` on PostgreSQL).
 */
export function releasablePending(
  keys: Pick<KeyColumns, 'id' | 'fingerprint' | 'status'>,
  key: Bound<string>,
  fingerprint: SQLWrapper,
): SQL {
  return and(
    eq(keys.id, key),
    eq(keys.status, KeyStatus.pending),
    sql`${keys.fingerprint} = coalesce(${fingerprint}, ${keys.fingerprint})`,
  ) as SQL;
}

/**
 * The row an owner may write its answer on (or release): its key and fingerprint, still pending,
 * and, when `attempt` is given, still carrying that fencing token (a takeover since the claim
 * raised it, and a release and a new claim gave the key another, so the condition then matches
 * nothing: a token names one ownership of the key for the key's whole life).
 */
export function ownerRow(
  keys: Pick<KeyColumns, 'id' | 'fingerprint' | 'status' | 'attempt'>,
  key: Bound<string>,
  fingerprint: Bound<string>,
  attempt?: Bound<number>,
): SQL {
  const conditions = [
    eq(keys.id, key),
    eq(keys.fingerprint, fingerprint),
    eq(keys.status, KeyStatus.pending),
  ];
  if (attempt !== undefined) conditions.push(eq(keys.attempt, attempt));
  // Never undefined: there are always at least three conditions.
  return and(...conditions) as SQL;
}

/**
 * The row a lease holder still holds with its token and that was not handed to an operator
 * (marked unrecorded): the target of the fenced writes that keep or give up a lease.
 */
export function leaseHolderRow(
  keys: KeyColumns,
  key: Bound<string>,
  fingerprint: Bound<string>,
  attempt: Bound<number>,
): SQL {
  return and(ownerRow(keys, key, fingerprint, attempt), eq(keys.unrecorded, false)) as SQL;
}

/**
 * The fencing token a takeover gives the row: one more than the greater of the row's token and
 * `fresh`, the token generated for this claim (see `nextFencingToken`). Greater than the old token,
 * so every write of the old owner is refused; at least as great as a fresh claim would get, so it
 * stays above every token the key had before it was last deleted; and never equal to `fresh`
 * (generated tokens are even, this one is odd when `fresh` wins), so the statement's returned
 * token tells a takeover from an insert. Written as `CASE` to read alike on every dialect.
 */
export function takeoverToken(keys: Pick<KeyColumns, 'attempt'>, fresh: Bound<number> | SQL): SQL {
  return sql`(CASE WHEN ${keys.attempt} > ${fresh} THEN ${keys.attempt} ELSE ${fresh} END) + 1`;
}

/**
 * The `DO UPDATE` half of the one-statement `acquire` (`INSERT … ON CONFLICT (id) DO UPDATE`):
 * it takes over the existing row only when it is pending under the same fingerprint, not marked
 * unrecorded, and its lease ended by `now`, raising the fencing token above both the old one and
 * the inserted row's fresh one (see {@link takeoverToken}) and moving the lease and the deadline
 * to the inserted row's (`excluded`). A row without a lease (NULL) never compares as lapsed, so it
 * is never taken over.
 */
export function leaseTakeover(
  keys: KeyColumns & { readonly leaseUntil: Column },
  now: Bound<number>,
) {
  return {
    set: {
      attempt: takeoverToken(keys, sql`excluded.attempt`),
      leaseUntil: sql`excluded.lease_until`,
      expires: sql`excluded.expires`,
    },
    setWhere: and(
      sql`${keys.fingerprint} = excluded.fingerprint`,
      eq(keys.status, KeyStatus.pending),
      eq(keys.unrecorded, false),
      lte(keys.leaseUntil, now),
    ),
  };
}

/**
 * The columns a claim writes when it replaces an expired answer (`acquire` with
 * `replaceExpired`): the row becomes this caller's pending one, as a fresh insert would make it,
 * except its fencing token (the dialect sets it above the old one, see {@link takeoverToken}).
 * Its target is the row of `key` that {@link expiredAnswer} matches, so a row a concurrent claim
 * already replaced (pending) or a sweep deleted is not touched.
 */
export function expiredAnswerReplacement(values: {
  readonly fingerprint: SQLWrapper;
  readonly expires: SQLWrapper;
  readonly leaseUntil: SQLWrapper;
}) {
  return {
    fingerprint: sql`${values.fingerprint}`,
    status: KeyStatus.pending,
    response: null,
    expires: sql`${values.expires}`,
    leaseUntil: sql`${values.leaseUntil}`,
    unrecorded: false,
  };
}

/**
 * The rows whose id starts with `prefix` (every row for `''`): what `pendingKeys({ prefix })`
 * lists, e.g. one scope's keys. `substr` and `length` count the same units on each dialect
 * (characters on SQLite and PostgreSQL, bytes of MySQL's VARBINARY), so the test is exact; the
 * range condition lets the primary key's index start at the prefix.
 */
export function idStartsWith(keys: Pick<KeyColumns, 'id'>, prefix: Bound<string>): SQL {
  return sql`(${keys.id} >= ${prefix} AND substr(${keys.id}, 1, length(${prefix})) = ${prefix})`;
}
