import { InvalidOptionError } from './errors.js';
import { KeyStatus } from './status.js';
import type { LeasedIdempotencyStore } from './store.js';
import { assertKey } from './validation.js';

/**
 * What {@link resolveUnknownOutcome} did: `resolved` (the answer is stored, the key done),
 * `missing` (no row), `done` (already settled), `notUnrecorded` (pending but not held for an
 * operator: its owner may still be running) or `changed` (the row changed hands while it was
 * being resolved; nothing was written).
 */
export type ResolveUnknownResult = 'resolved' | 'missing' | 'done' | 'notUnrecorded' | 'changed';

/**
 * Settles a key held as unrecorded (its work threw `OutcomeUnknownError`, or ran without its
 * answer being recorded) with the answer the work turned out to have: stores `answer` as a
 * finish of the row's own owner would, fenced by the row's fingerprint and token, so a row that
 * was released and claimed again meanwhile is never overwritten. Retries then replay `answer`.
 * `idem resolve` runs this. The answer must have the form the key's entry point stores: an HTTP
 * answer as `idem show --json` prints it (`{ "wire": 1, "status", "headers", "body" }`), a
 * function's result as its codec encodes it (the default codec keeps a plain JSON result as
 * `{ "value": result }`).
 *
 * @param store - a store with leases, of any dialect
 * @param key - the stored id (scope included, see `storedId`)
 * @param answer - the answer to store; it must be representable as JSON, as for `finish`
 * @throws {@link InvalidKeyError} for a bad key and {@link UnserializableResponseError} for an
 * answer JSON cannot keep, before anything is written
 */
export async function resolveUnknownOutcome(
  store: Pick<LeasedIdempotencyStore, 'get' | 'finish'>,
  key: string,
  answer: unknown,
): Promise<ResolveUnknownResult> {
  assertKey(key);
  if (answer === undefined) throw new InvalidOptionError('resolveUnknownOutcome needs an answer');
  const record = await store.get(key);
  if (record === null) return 'missing';
  if (record.status === KeyStatus.done) return 'done';
  if (!record.unrecorded) return 'notUnrecorded';
  const stored = await store.finish(key, record.fingerprint, answer, record.fencingToken);
  return stored ? 'resolved' : 'changed';
}
