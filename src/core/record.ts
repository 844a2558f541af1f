import { parseResponse } from './json.js';
import type { KeyStatus } from './status.js';
import type { IdempotencyRecord } from './store.js';

/** A row of the `keys` table as every dialect reads it. */
export interface KeyRow {
  readonly id: string;
  readonly fingerprint: string;
  readonly status: KeyStatus;
  readonly response: string | null;
  readonly expires: number;
}

/**
 * Turns a stored row into the record `get` returns, parsing the stored JSON answer.
 *
 * @example
 * ```ts
 * toRecord({ id: 'k', fingerprint: 'd', status: 'done', response: '{"r":1}', expires: 10 });
 * // { key: 'k', fingerprint: 'd', status: 'done', expires: 10, response: { r: 1 } }
 * ```
 */
export function toRecord<T>(row: KeyRow): IdempotencyRecord<T> {
  return {
    key: row.id,
    fingerprint: row.fingerprint,
    status: row.status,
    expires: row.expires,
    response: row.response == null ? null : parseResponse<T>(row.response),
  };
}
