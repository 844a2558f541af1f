export { TransactionRolledBackError } from '../core/rolled-back.js';
export type { Step, StepContext, StepLog, StepLogOptions, StepRecorder } from '../core/steps.js';
export { DEFAULT_MAX_STEP_BYTES, MIN_STEP_SECRET_BYTES } from '../core/steps.js';
export type {
  KeyOwner,
  TransactionOutcome,
  TransactionRunner,
} from '../core/transaction-runner.js';
export {
  CallInProgressError,
  CallOutcomeUnknownError,
  CallSupersededError,
  KeyReusedError,
  ResultExpiredError,
  ResultNotRecordedError,
  ResultNotStorableError,
} from './errors.js';
export { payloadFingerprint } from './fingerprint.js';
export { makeIdempotent } from './make-idempotent.js';
export type {
  MakeIdempotentOptions,
  ResultCodec,
  SteppedOptions,
  TransactionalOptions,
} from './options.js';
export { DEFAULT_FUNCTION_LEASE_SECONDS, DEFAULT_FUNCTION_TTL_SECONDS } from './options.js';
export type { ResumeAbandonedOptions, ResumeOutcome } from './resume.js';
export { resumeAbandoned } from './resume.js';
