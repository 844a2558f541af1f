import {
  type AnswerUnreadableError,
  type EncryptionKeyMissingError,
  ErrorCode,
  IdempotencyError,
} from '../core/errors.js';
import type { MemberDifference } from '../core/member-digests.js';
import type { IdempotencyRecord } from '../core/store.js';
import type { HttpResponse, NotKeptReason } from './response.js';

/**
 * The `type` URIs of the problem responses (RFC 9457). They identify the problem; they are not
 * meant to be dereferenced.
 */
export const ProblemType = {
  keyMissing: 'urn:drizzle-idempotency:problem:key-missing',
  keyMalformed: 'urn:drizzle-idempotency:problem:key-malformed',
  keyReused: 'urn:drizzle-idempotency:problem:key-reused',
  requestInProgress: 'urn:drizzle-idempotency:problem:request-in-progress',
  answerExpired: 'urn:drizzle-idempotency:problem:answer-expired',
  answerNotRecorded: 'urn:drizzle-idempotency:problem:answer-not-recorded',
  answerNotKept: 'urn:drizzle-idempotency:problem:answer-not-kept',
  bodyRefused: 'urn:drizzle-idempotency:problem:body-refused',
  scopeMalformed: 'urn:drizzle-idempotency:problem:scope-malformed',
  requestSuperseded: 'urn:drizzle-idempotency:problem:request-superseded',
  requestRolledBack: 'urn:drizzle-idempotency:problem:request-rolled-back',
  outcomeUnknown: 'urn:drizzle-idempotency:problem:outcome-unknown',
  answerUnreadable: 'urn:drizzle-idempotency:problem:answer-unreadable',
} as const;

/** One of the values of {@link ProblemType}. */
export type ProblemType = (typeof ProblemType)[keyof typeof ProblemType];

/** An RFC 9457 problem details object, as sent with `application/problem+json`. */
export interface ProblemDetails {
  readonly type: ProblemType;
  readonly title: string;
  readonly status: number;
  readonly detail: string;
}

/** The media type of every problem response. */
export const PROBLEM_CONTENT_TYPE = 'application/problem+json';

/**
 * An outcome that is answered with a problem instead of the handler's answer. Each kind is its
 * own class, so adapters and users can match on it (`instanceof`, or `code`), and
 * {@link IdempotencyProblem.toResponse} renders the default `application/problem+json` answer.
 *
 * @example
 * ```ts
 * if (result.outcome === 'problem' && result.problem instanceof RequestInProgressError) {
 *   metrics.increment('idempotency.in_progress');
 * }
 * ```
 */
export abstract class IdempotencyProblem extends IdempotencyError {
  /** The HTTP status of the problem response. */
  abstract readonly status: number;
  /** The problem's `type` URI. */
  abstract readonly type: ProblemType;
  /** A short, fixed summary of the problem type. */
  abstract readonly title: string;

  /** The RFC 9457 body: `type`, `title`, `status` and `detail` (the message). */
  details(): ProblemDetails {
    return { type: this.type, title: this.title, status: this.status, detail: this.message };
  }

  /** Headers beyond the content type; `Retry-After` for a request in progress. */
  protected extraHeaders(): Record<string, string> {
    return {};
  }

  /** The default problem response. */
  toResponse(): HttpResponse {
    return {
      status: this.status,
      headers: { 'content-type': PROBLEM_CONTENT_TYPE, ...this.extraHeaders() },
      body: { ...this.details() },
    };
  }
}

/** 400: the route requires an `Idempotency-Key` header and the request has none. */
export class KeyMissingError extends IdempotencyProblem {
  readonly status = 400;
  readonly type = ProblemType.keyMissing;
  readonly title = 'Idempotency-Key header missing';

  constructor() {
    super(
      ErrorCode.keyMissing,
      'this operation requires an Idempotency-Key header; send a unique key (such as a UUID) and reuse it only to retry the same request',
    );
  }
}

/** 400: the `Idempotency-Key` header is not a key this server accepts. */
export class KeyMalformedError extends IdempotencyProblem {
  readonly status = 400;
  readonly type = ProblemType.keyMalformed;
  readonly title = 'Idempotency-Key header malformed';

  /** @param reason - what is wrong with the header value */
  constructor(reason: string) {
    super(ErrorCode.keyMalformed, `the Idempotency-Key header is malformed: ${reason}`);
  }
}

/**
 * 422: the key was first used for a request with a different fingerprint. It never runs. When both
 * requests kept their members' digests (the default fingerprint, a JSON object body), the problem
 * names the top-level members that differ, `differentMembers`: names only, never values.
 */
export class KeyReusedError extends IdempotencyProblem {
  readonly status = 422;
  readonly type = ProblemType.keyReused;
  readonly title = 'Idempotency-Key reused with a different request';
  /** The record that holds the key (its response is not exposed to the client). */
  readonly record: IdempotencyRecord<unknown>;
  /** The top-level body members that differ from the first request's; `undefined` when unknown. */
  readonly members: MemberDifference | undefined;

  /**
   * @param record - the record that holds the key
   * @param members - the members that differ, when both requests kept their digests
   */
  constructor(record: IdempotencyRecord<unknown>, members?: MemberDifference) {
    super(ErrorCode.keyReused, keyReusedDetail(members));
    this.record = record;
    this.members = members;
  }

  /**
   * The RFC 9457 body, with `differentMembers` (the names) and `membersCapped` (`true` when a
   * body had more members than are kept, at most `MAX_MEMBER_DIGESTS`, fewer when their names
   * are long) when the members are known.
   */
  override details(): ProblemDetails & {
    readonly differentMembers?: readonly string[];
    readonly membersCapped?: boolean;
  } {
    const { members } = this;
    if (members === undefined) return super.details();
    return {
      ...super.details(),
      differentMembers: members.names,
      ...(members.capped ? { membersCapped: true } : {}),
    };
  }
}

function keyReusedDetail(members: MemberDifference | undefined): string {
  const base =
    'this Idempotency-Key was already used for a request with a different method, path or body; use a new key for a new request';
  if (members === undefined) return base;
  const capped = members.capped
    ? ` (a body has more members than are kept: only the first ones by name are compared)`
    : '';
  if (members.names.length === 0) {
    return `${base}; the body's top-level members compared are the same${capped}`;
  }
  const names = members.names.map((name) => JSON.stringify(name)).join(', ');
  return `${base}; the body's top-level members that differ: ${names}${capped}`;
}

/** 409 with `Retry-After`: the first request with this key is still running. It never runs twice. */
export class RequestInProgressError extends IdempotencyProblem {
  readonly status = 409;
  readonly type = ProblemType.requestInProgress;
  readonly title = 'Request with this Idempotency-Key in progress';
  /** The `Retry-After` value, in seconds. */
  readonly retryAfterSeconds: number;
  /** The pending record, or `null` when the key kept changing hands while it was looked at. */
  readonly record: IdempotencyRecord<unknown> | null;

  /**
   * @param retryAfterSeconds - the `Retry-After` value
   * @param record - the pending record, if one was seen
   */
  constructor(retryAfterSeconds: number, record: IdempotencyRecord<unknown> | null) {
    super(
      ErrorCode.requestInProgress,
      'a request with this Idempotency-Key is still being processed; retry it later to get its answer',
    );
    this.retryAfterSeconds = retryAfterSeconds;
    this.record = record;
  }

  protected override extraHeaders(): Record<string, string> {
    return { 'retry-after': String(this.retryAfterSeconds) };
  }
}

/**
 * 409 without `Retry-After`: the first request with this key declared its outcome unknown (its
 * handler threw an `OutcomeUnknownError`), or ran without its answer being recorded. The key is
 * held for an operator and the handler does not run again; retrying soon gets the same answer.
 * An operator settles it with `idem resolve KEY --answer FILE` or `idem release KEY`.
 */
export class OutcomeUnsettledError extends IdempotencyProblem {
  readonly status = 409;
  readonly type = ProblemType.outcomeUnknown;
  readonly title = 'Outcome of the request with this Idempotency-Key unknown';

  constructor() {
    super(
      ErrorCode.outcomeUnknown,
      'the outcome of the first request with this Idempotency-Key is unknown and is being settled; it will not run again until it is',
    );
  }
}

/**
 * 409: the key's answer is past its retention deadline but not yet purged. It is neither replayed
 * (the guarantee has ended) nor run again (the row is still there). Once the sweep has purged it,
 * the key is a new request.
 */
export class AnswerExpiredError extends IdempotencyProblem {
  readonly status = 409;
  readonly type = ProblemType.answerExpired;
  readonly title = 'Idempotency-Key answer expired';
  /** The expired record. */
  readonly record: IdempotencyRecord<unknown>;

  /** @param record - the expired record */
  constructor(record: IdempotencyRecord<unknown>) {
    super(
      ErrorCode.answerExpired,
      "the answer for this Idempotency-Key is past its retention period and is no longer replayed; the key becomes a new request once the server's next retention sweep deletes it (a server with afterExpiry: 'new-request' takes it as new at once); use a new key for a new request now",
    );
    this.record = record;
  }
}

/**
 * 500: the handler ran, but the request could not be closed in the store: its answer could not be
 * recorded (the store failed or refused it, or `finish` found no pending row of this request:
 * someone released or replaced it), or, for an answer whose status is not stored, releasing its key
 * failed. An answer that could not be recorded does **not** release the key: the handler's effect
 * happened, and a released key would let a retry run it a second time. After a store failure the
 * key stays `pending`, so retries get 409 `request-in-progress` and never run. Alert on this
 * problem: someone checks whether the effect happened, then releases the key
 * (`store.release(id, record.fingerprint)`), or a lease policy of yours does. Only a handler that
 * *failed* (threw, or answered a status that is not stored) releases its key. `response` is the
 * handler's answer, for logs and for an `onError` hook that prefers to send it.
 *
 * In the transactional forms (`expressTransaction`, …) the answer is recorded inside the handler's
 * transaction: when that transaction fails (the recording or the commit), nothing of the handler's
 * committed, so the key is released instead, and the database's error is the `cause`. The body
 * sent is always the fixed one of {@link IdempotencyProblem.details}: never a statement, its
 * parameters or a stack.
 */
export class AnswerNotRecordedError extends IdempotencyProblem {
  readonly status = 500;
  readonly type = ProblemType.answerNotRecorded;
  readonly title = 'Answer not recorded';
  /** The handler's answer that could not be stored. */
  readonly response: HttpResponse;
  /** Why it was not stored, for logs; not sent to the client. */
  readonly reason: string;

  /**
   * @param reason - why it was not stored
   * @param response - the handler's answer
   * @param cause - the underlying error, if any
   */
  constructor(reason: string, response: HttpResponse, cause?: unknown) {
    super(
      ErrorCode.answerNotRecorded,
      'the request was processed but its answer could not be recorded for replay; do not retry it blindly',
      { cause },
    );
    this.response = response;
    this.reason = reason;
  }
}

const NOT_KEPT_BECAUSE: Readonly<Record<NotKeptReason, string>> = {
  'too-large': 'it was larger than the largest answer kept',
  stream: 'it was streamed, and streamed answers are not kept',
  unfinished: 'its stream did not end before the client left',
  'still-open': 'its stream was still open when the layer stopped waiting for its end',
};

/**
 * 410: the request with this key ran and was answered, but its answer was not kept for replay
 * (see {@link NotKeptReason}): only its size was. It is not run again (its effect happened) and
 * its answer cannot be replayed; the client must look the result up another way, or use a new key
 * for a new request. The key is released by retention like any stored answer. The detail says why
 * the answer was not kept, without its size or content.
 */
export class AnswerNotKeptError extends IdempotencyProblem {
  readonly status = 410;
  readonly type = ProblemType.answerNotKept;
  readonly title = 'Idempotency-Key answer not kept';
  /** The size of the first answer's body as far as it was sent, in bytes. */
  readonly bytes: number;
  /** Why it was not kept. */
  readonly reason: NotKeptReason;

  /**
   * @param bytes - the size of the first answer's body, as far as it was sent
   * @param reason - why it was not kept; `too-large` for an answer stored before reasons were
   */
  constructor(bytes: number, reason: NotKeptReason = 'too-large') {
    super(
      ErrorCode.answerNotKept,
      `the request with this Idempotency-Key was processed, but its answer was not kept for replay because ${NOT_KEPT_BECAUSE[reason]}; it is not run again`,
    );
    this.bytes = bytes;
    this.reason = reason;
  }
}

/**
 * The former name of {@link AnswerNotKeptError}, which now covers streams too.
 *
 * @deprecated use {@link AnswerNotKeptError}
 * @alias
 */
export const AnswerTooLargeError = AnswerNotKeptError;
/**
 * The former name of {@link AnswerNotKeptError}.
 *
 * @deprecated use {@link AnswerNotKeptError}
 * @alias
 */
export type AnswerTooLargeError = AnswerNotKeptError;

/**
 * 400: the request body cannot be fingerprinted (a parsed body JSON cannot represent). Nothing is
 * reserved and the handler does not run.
 */
export class BodyRefusedError extends IdempotencyProblem {
  readonly status = 400;
  readonly type = ProblemType.bodyRefused;
  readonly title = 'Request body refused';

  /** @param reason - why the body was refused */
  constructor(reason: string) {
    super(ErrorCode.bodyRefused, reason);
  }
}

/**
 * 400: the request's scope (who its key belongs to, as the `scope` option read it from the
 * request, such as an empty `X-Client-Id:` header) is an empty string or not well-formed UTF-16.
 * A scope comes from the request, so a bad one is the client's to fix, not a server error. Nothing
 * is reserved and the handler does not run.
 */
export class ScopeMalformedError extends IdempotencyProblem {
  readonly status = 400;
  readonly type = ProblemType.scopeMalformed;
  readonly title = 'Request scope malformed';

  /** @param reason - what is wrong with the scope */
  constructor(reason: string) {
    super(
      ErrorCode.scopeMalformed,
      `the request does not say who it is from in a form this server accepts: ${reason}`,
    );
  }
}

/**
 * 409: this request's lease lapsed while its handler ran (the process froze, or renewing the lease
 * failed), and a retry took the key over. Its answer is refused by the fencing token and not
 * stored: the key's answer is the new owner's, which a retry gets. The handler's effect may have
 * happened twice; the `onOutcome` hook hears this as `superseded`.
 */
export class RequestSupersededError extends IdempotencyProblem {
  readonly status = 409;
  readonly type = ProblemType.requestSuperseded;
  readonly title = 'Request with this Idempotency-Key superseded';
  /** The handler's answer, which was not stored. */
  readonly response: HttpResponse;

  /** @param response - the handler's answer, not stored */
  constructor(response: HttpResponse) {
    super(
      ErrorCode.requestSuperseded,
      'this request took longer than its lease and a retry took its Idempotency-Key over; retry it to get the answer of record',
    );
    this.response = response;
  }
}

/** The `Retry-After` of {@link RequestRolledBackError}: a rollback by the database is short-lived. */
const ROLLED_BACK_RETRY_AFTER_SECONDS = 1;

/**
 * 503 with `Retry-After`: the database rolled back the transaction of a transactional route on its
 * own (a serialization failure or a deadlock) on every attempt the runner made: none of the
 * handler's writes and no answer were committed, and the key was released, so the client may send
 * the same request again and it runs anew. `cause` is the runner's `TransactionRolledBackError`.
 */
export class RequestRolledBackError extends IdempotencyProblem {
  readonly status = 503;
  readonly type = ProblemType.requestRolledBack;
  readonly title = 'Request rolled back';
  /** The `Retry-After` value, in seconds. */
  readonly retryAfterSeconds = ROLLED_BACK_RETRY_AFTER_SECONDS;

  /** @param cause - the runner's error, for logs; not sent to the client */
  constructor(cause: unknown) {
    super(
      ErrorCode.requestRolledBack,
      'the database rolled this request back because of a conflict with concurrent requests; nothing of it was committed and its Idempotency-Key is free, so retry it',
      { cause },
    );
  }

  protected override extraHeaders(): Record<string, string> {
    return { 'retry-after': String(this.retryAfterSeconds) };
  }
}

/**
 * 500: an answer is stored for this key but does not open: it is sealed under an encryption key id
 * the store's keyring lacks ({@link EncryptionKeyMissingError}), or it fails its authentication
 * ({@link AnswerUnreadableError}). The request is **not** run again: its effect happened once.
 * The body names neither the key id nor anything of the keyring; the store's error is the `cause`,
 * for logs. Put the retired key back in the keyring (and run `idem rekey`) to answer it again.
 */
export class SealedAnswerError extends IdempotencyProblem {
  readonly status = 500;
  readonly type = ProblemType.answerUnreadable;
  readonly title = 'Answer unreadable';

  /** @param cause - the store's {@link EncryptionKeyMissingError} or {@link AnswerUnreadableError} */
  constructor(cause: unknown) {
    super(
      ErrorCode.answerUnreadable,
      'an answer is stored for this key but cannot be read by the server; the request was not run again',
      { cause },
    );
  }
}
