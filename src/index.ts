export {
  DatabaseOpenError,
  ErrorCode,
  IdempotencyError,
  InvalidArgumentError,
  InvalidDigestError,
  InvalidKeyError,
  InvalidLimitError,
  InvalidOptionError,
  InvalidTimeError,
  SchemaMismatchError,
  StoreClosedError,
  UnserializableResponseError,
} from './core/errors.js';
export type { JsonValue } from './core/json.js';
export { parseResponse, serializeResponse } from './core/json.js';
export { countByStatus, KeyStatus } from './core/status.js';
export type {
  IdempotencyRecord,
  IdempotencyStore,
  MaybePromise,
  RetentionStats,
  StatusCounts,
} from './core/store.js';
export { DEFAULT_LIMIT, MAX_BATCH_SIZE, MAX_LIMIT } from './core/validation.js';
export * from './function/index.js';
export * from './http/index.js';
export type {
  SweepableStore,
  SweepOptions,
  SweepProgress,
  SweepResult,
  SweepStop,
} from './sweep.js';
export { DEFAULT_BATCH_SIZE, sweep, validateSweepOptions } from './sweep.js';
