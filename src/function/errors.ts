import { ErrorCode, IdempotencyError } from '../core/errors.js';
import type { MemberDifference } from '../core/member-digests.js';
import type { IdempotencyRecord } from '../core/store.js';

/**
 * Another call with the same key and payload is running and the wrapper was not configured to
 * wait for it (or waited its whole budget). Nothing ran; call again later.
 *
 * @example
 * ```ts
 * try {
 *   await charge(order);
 * } catch (error) {
 *   if (error instanceof CallInProgressError) requeueLater(order);
 * }
 * ```
 */
export class CallInProgressError extends IdempotencyError {
  /** The idempotency key the other call holds. */
  readonly key: string;
  /** The row as last seen, or `null` when it kept changing hands. */
  readonly record: IdempotencyRecord<unknown> | null;
  /** When the other call's lease runs out (seconds on the wrapper's clock), when known. */
  readonly leaseUntil: number | null;

  /**
   * @param key - the idempotency key
   * @param record - the row as last seen
   * @param leaseUntil - the lease deadline of the running call, when known
   * @param message - a sentence for a human, when not the default
   */
  constructor(
    key: string,
    record: IdempotencyRecord<unknown> | null,
    leaseUntil: number | null = null,
    message = `a call with idempotency key ${JSON.stringify(key)} is still in progress`,
  ) {
    super(ErrorCode.requestInProgress, message);
    this.key = key;
    this.record = record;
    this.leaseUntil = leaseUntil;
  }
}

/**
 * The key was first used with a different payload. Nothing ran: a key names one operation, and
 * replaying another payload's result would be wrong. When both payloads are objects fingerprinted
 * by default, `members` names their top-level members that differ (names only, never values).
 */
export class KeyReusedError extends IdempotencyError {
  /** The idempotency key. */
  readonly key: string;
  /** The row that holds the key, with the other payload's fingerprint. */
  readonly record: IdempotencyRecord<unknown>;
  /** The top-level payload members that differ from the first call's; `undefined` when unknown. */
  readonly members: MemberDifference | undefined;

  /**
   * @param key - the idempotency key
   * @param record - the row holding the key
   * @param members - the members that differ, when both calls kept their digests
   */
  constructor(key: string, record: IdempotencyRecord<unknown>, members?: MemberDifference) {
    const differ =
      members === undefined || members.names.length === 0
        ? ''
        : `; its top-level members that differ: ${members.names.map((name) => JSON.stringify(name)).join(', ')}`;
    super(
      ErrorCode.keyReused,
      `idempotency key ${JSON.stringify(key)} was used with a different payload${differ}`,
    );
    this.key = key;
    this.record = record;
    this.members = members;
  }
}

/**
 * The key's result is stored but its retention deadline has passed and it was not purged yet: it
 * is neither replayed nor run again. Once retention deletes it (the next sweep, e.g. of
 * `startSweeper`), the key is new again; with `afterExpiry: 'new-request'` it is new at once.
 */
export class ResultExpiredError extends IdempotencyError {
  /** The idempotency key. */
  readonly key: string;
  /** The expired row. */
  readonly record: IdempotencyRecord<unknown>;

  /**
   * @param key - the idempotency key
   * @param record - the expired row
   */
  constructor(key: string, record: IdempotencyRecord<unknown>) {
    super(
      ErrorCode.answerExpired,
      `the stored result of idempotency key ${JSON.stringify(key)} expired at ${record.expires}: it is neither returned nor run again until the next sweep deletes it, after which the key is new; pass afterExpiry: 'new-request' to makeIdempotent to run such a call as a new one at once`,
    );
    this.key = key;
    this.record = record;
  }
}

/**
 * The function ran (its effect may have happened) but its result could not be recorded: the store
 * failed (or a custom codec's `serialize` threw), or the key was taken from this call while it
 * ran. A result with no stored form is {@link ResultNotStorableError} instead. The key is
 * **not** released, so no retry runs the effect a second time on its own: alert on this error,
 * check the effect, then release the key by hand. `result` holds what the function returned.
 */
export class ResultNotRecordedError extends IdempotencyError {
  /** The idempotency key. */
  readonly key: string;
  /** What the function returned. */
  readonly result: unknown;

  /**
   * @param key - the idempotency key
   * @param result - what the function returned
   * @param reason - why it was not recorded
   * @param cause - the underlying error, when there is one
   */
  constructor(key: string, result: unknown, reason: string, cause?: unknown) {
    super(
      ErrorCode.answerNotRecorded,
      `the result of idempotency key ${JSON.stringify(key)} was not recorded: ${reason}`,
      { cause },
    );
    this.key = key;
    this.result = result;
  }
}

/**
 * The call lost its key while it ran (its lease lapsed and another call took the key over, or the
 * key was released by hand), and its transaction rolled back: none of its writes and no result
 * were committed. The call that holds the key now runs the work; call again to get its result.
 * Its `code` is `IDEMPOTENCY_REQUEST_SUPERSEDED`, the code of the HTTP layer's
 * `request-superseded` problem; it is still a {@link CallInProgressError}, since the key's work
 * goes on under its new owner.
 */
export class CallSupersededError extends CallInProgressError {
  override readonly code: ErrorCode = ErrorCode.requestSuperseded;

  /** @param key - the idempotency key */
  constructor(key: string) {
    super(
      key,
      null,
      null,
      `the call with idempotency key ${JSON.stringify(key)} lost its key while it ran and was rolled back`,
    );
  }
}

/**
 * The function ran, but its result has no faithful stored form under the result codec (a `Map`, a
 * `Set`, a class instance, a function, a cycle; see the `result` option). The key is recorded done
 * with this outcome, so the function is not run again for it: this call and every later call with
 * the key (until retention ends) reject with this error. Return plain data (or give a `result`
 * codec) and use a new key. Its `code` is `IDEMPOTENCY_UNSERIALIZABLE_RESPONSE`.
 */
export class ResultNotStorableError extends IdempotencyError {
  /** The idempotency key. */
  readonly key: string;
  /** What the function returned, on the call that ran it; `undefined` on a later call. */
  readonly result: unknown;
  /** Why the result could not be stored, e.g. `an instance of Map at $.byId`. */
  readonly reason: string;

  /**
   * @param key - the idempotency key
   * @param result - what the function returned, when this call ran it
   * @param reason - why it could not be stored
   * @param cause - the codec's error, when this call ran the function
   */
  constructor(key: string, result: unknown, reason: string, cause?: unknown) {
    super(
      ErrorCode.unserializableResponse,
      `the result of idempotency key ${JSON.stringify(key)} could not be stored (${reason}); the function ran once and does not run again for this key`,
      { cause },
    );
    this.key = key;
    this.result = result;
    this.reason = reason;
  }
}

/**
 * The key's work declared its outcome unknown (it threw an `OutcomeUnknownError`), or ran without
 * its result being recorded: it is held for an operator, and nothing ran. It stays so until
 * `idem resolve KEY --answer FILE` stores the result the work turned out to have, or
 * `idem release KEY` frees the key for a new run. Its `code` is `IDEMPOTENCY_OUTCOME_UNKNOWN`.
 */
export class CallOutcomeUnknownError extends IdempotencyError {
  /** The idempotency key held for an operator. */
  readonly key: string;

  /** @param key - the idempotency key */
  constructor(key: string) {
    super(
      ErrorCode.outcomeUnknown,
      `the outcome of the call with idempotency key ${JSON.stringify(key)} is unknown: it waits for an operator (idem resolve or idem release)`,
    );
    this.key = key;
  }
}
