export type { Step, StepContext, StepLog } from '../core/steps.js';
export type { Execution } from './execution.js';
export { fingerprintPath, requestFingerprint } from './fingerprint.js';
export type { Decision, IdempotentExecutor } from './idempotent.js';
export { idempotent, REPLAYED_HEADER } from './idempotent.js';
export type { ParsedKey } from './key.js';
export { IDEMPOTENCY_KEY_HEADER, MAX_KEY_LENGTH, parseIdempotencyKey } from './key.js';
export type { IdempotentOptions } from './options.js';
export {
  DEFAULT_LEASE_SECONDS,
  DEFAULT_MAX_STORED_BYTES,
  DEFAULT_TTL_SECONDS,
} from './options.js';
export type { IdempotentResult, OutcomeEvent } from './outcome.js';
export { Outcome } from './outcome.js';
export type { ProblemDetails } from './problems.js';
export {
  AnswerExpiredError,
  AnswerNotRecordedError,
  AnswerTooLargeError,
  BodyRefusedError,
  IdempotencyProblem,
  KeyMalformedError,
  KeyMissingError,
  KeyReusedError,
  OutcomeUnsettledError,
  PROBLEM_CONTENT_TYPE,
  ProblemType,
  RequestInProgressError,
  RequestRolledBackError,
  RequestSupersededError,
  ScopeMalformedError,
  SealedAnswerError,
} from './problems.js';
export type { HeaderValues, IdempotentRequest } from './request.js';
export type { HttpResponse, StoredAnswer, WireResponse } from './response.js';
export { DEFAULT_STORED_HEADERS } from './response.js';
export { storedId } from './scope.js';
export { idempotencyStep } from './steps.js';
