/**
 * The core: the store contract and its types, the errors every store throws, the limits, and
 * `sweep`. The HTTP layer is `drizzle-idempotency/http` (and one subpath per framework), the
 * function wrapper `drizzle-idempotency/function`, each store its dialect's subpath.
 *
 * @module
 */

export type { AfterExpiry } from './core/claim-options.js';
export type {
  DeploymentFinding,
  DeploymentReport,
  DeploymentWarningHook,
  DeploymentWarningOptions,
} from './core/deployment.js';
export { DeploymentCode, DeploymentLevel, DeploymentRefusedError } from './core/deployment.js';
export type { EncryptionOption, Keyring } from './core/encryption.js';
export { isSealed, sealedKeyId } from './core/encryption.js';
export {
  AnswerUnreadableError,
  DatabaseOpenError,
  EncryptionKeyMissingError,
  ErrorCode,
  IdempotencyError,
  InvalidArgumentError,
  InvalidFingerprintError,
  InvalidKeyError,
  InvalidLimitError,
  InvalidOptionError,
  InvalidTimeError,
  OutcomeUnknownError,
  ReplicationUnconfirmedError,
  SchemaMismatchError,
  StepNotStorableError,
  StepSupersededError,
  StoreClosedError,
  UnrecognisedDatabaseError,
  UnserializableResponseError,
} from './core/errors.js';
export type { JsonValue } from './core/json.js';
export {
  DEFAULT_PENDING_LIMIT,
  MAX_PENDING_LIMIT,
} from './core/lease.js';
export { MAX_MEMBER_DIGESTS, type MemberDifference } from './core/member-digests.js';
export type { MigrationStatus } from './core/migrator.js';
export type { ReleaseStuckKeyOptions, ReleaseStuckKeyResult } from './core/release-stuck.js';
export { releaseStuckKey } from './core/release-stuck.js';
export { type ResolveUnknownResult, resolveUnknownOutcome } from './core/resolve-unknown.js';
export { retentionCycle } from './core/retention-cycle.js';
export { DEFAULT_TRANSACTION_ATTEMPTS, TransactionRolledBackError } from './core/rolled-back.js';
export { KeyStatus } from './core/status.js';
export type {
  AcquireOptions,
  AcquireResult,
  IdempotencyRecord,
  IdempotencyStore,
  LeasedIdempotencyStore,
  LeaseState,
  LeaseStats,
  MaybePromise,
  PendingKey,
  PendingKeysOptions,
  ReleasePendingResult,
  RetentionStats,
  StatusCounts,
} from './core/store.js';
export {
  DEFAULT_LIMIT,
  MAX_BATCH_SIZE,
  MAX_KEY_BYTES,
  MAX_LEASE_SECONDS,
  MAX_LIMIT,
} from './core/validation.js';
export {
  DEFAULT_WAIT_INTERVAL_MS,
  MAX_WAIT_BACKOFF_MS,
  MAX_WAIT_MS,
  MIN_WAIT_INTERVAL_MS,
} from './core/wait.js';
export type {
  SweepableStore,
  SweepOptions,
  SweepProgress,
  SweepResult,
  SweepStop,
} from './sweep.js';
export {
  DEFAULT_BATCH_MILLIS,
  DEFAULT_BATCH_SIZE,
  MAX_BATCH_MILLIS,
  MIN_TIMED_BATCH_SIZE,
  sweep,
} from './sweep.js';
export type { Sweeper, SweeperOptions, SweeperStore } from './sweeper.js';
export {
  DEFAULT_SWEEP_INTERVAL_SECONDS,
  DEFAULT_SWEEPER_LEASE_SECONDS,
  SWEEP_JITTER,
  SWEEPER_LEASE_FINGERPRINT,
  SWEEPER_LEASE_KEY,
  startSweeper,
} from './sweeper.js';
