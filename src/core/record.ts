import { parseResponse } from './json.js';
import { KeyStatus } from './status.js';
import type { IdempotencyRecord } from './store.js';

/**
 * A row of the keys table as every dialect reads it. The lease columns come back as each driver
 * gives them (a boolean, 0/1, `'t'`/`'f'`; an integer as a number or a string) and may be absent
 * on a store that does not read them yet: the row then has no lease, fencing token 1.
 */
export interface KeyRow {
  readonly id: string;
  readonly fingerprint: string;
  readonly status: KeyStatus;
  readonly response: string | null;
  readonly expires: number;
  readonly lease_until?: number | string | null;
  readonly attempt?: number | string;
  readonly unrecorded?: boolean | number | string;
}

/** A boolean column as any driver returns it: `true`, `1`, `'1'`, `'t'` or `'true'` is true. */
export function readBoolean(value: boolean | number | string | null | undefined): boolean {
  return value === true || value === 1 || value === '1' || value === 't' || value === 'true';
}

/** A nullable number column as any driver returns it (PostgreSQL drivers may give a string). */
export function readNumber(value: number | string | null | undefined): number | null {
  return value == null ? null : Number(value);
}

/**
 * Turns a stored row into the record `get` returns, parsing the stored JSON answer.
 *
 * @example
 * ```ts
 * toRecord({ id: 'k', fingerprint: 'd', status: 'done', response: '{"r":1}', expires: 10 });
 * // { key: 'k', fingerprint: 'd', status: 'done', expires: 10, response: { r: 1 },
 * //   leaseUntil: null, fencingToken: 1, unrecorded: false }
 * ```
 */
export function toRecord<T>(row: KeyRow): IdempotencyRecord<T> {
  return {
    key: row.id,
    fingerprint: row.fingerprint,
    status: row.status,
    expires: row.expires,
    response: row.response == null ? null : parseResponse<T>(row.response),
    leaseUntil: readNumber(row.lease_until),
    fencingToken: readNumber(row.attempt) ?? 1,
    unrecorded: readBoolean(row.unrecorded),
  };
}

/**
 * Whether `row` already holds this owner's own answer: done, under `fingerprint`, with the fencing
 * token `attempt` and exactly the answer `text`. A fenced `finish` whose commit reached the
 * database but whose acknowledgement was lost (a dropped connection, a failover) finds this on its
 * retry: the answer is stored, so the retry reports success instead of a lost ownership. A token
 * names one ownership for the key's whole life, so no other owner's answer can match.
 */
export function holdsOwnAnswer(
  row: KeyRow | undefined,
  fingerprint: string,
  attempt: number,
  text: string,
): boolean {
  return (
    row !== undefined &&
    row.status === KeyStatus.done &&
    row.fingerprint === fingerprint &&
    Number(row.attempt) === attempt &&
    row.response === text
  );
}
