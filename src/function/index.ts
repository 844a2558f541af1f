export { TransactionRolledBackError } from '../core/rolled-back.js';
export type {
  KeyOwner,
  TransactionOutcome,
  TransactionRunner,
} from '../core/transaction-runner.js';
export {
  CallInProgressError,
  CallSupersededError,
  KeyReusedError,
  ResultExpiredError,
  ResultNotRecordedError,
  ResultNotStorableError,
} from './errors.js';
export { payloadFingerprint } from './fingerprint.js';
export { makeIdempotent } from './make-idempotent.js';
export type { MakeIdempotentOptions, ResultCodec, TransactionalOptions } from './options.js';
export { DEFAULT_FUNCTION_LEASE_SECONDS, DEFAULT_FUNCTION_TTL_SECONDS } from './options.js';
