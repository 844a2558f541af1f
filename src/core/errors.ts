/**
 * Stable error codes, one per kind of failure. Match on these rather than on messages. The HTTP
 * layer's problems and `makeIdempotent`'s errors share them: the same outcome of the claim engine
 * has one code in both (a key held by another payload is `keyReused`, a run whose key was taken
 * over is `requestSuperseded`, and so on).
 */
export const ErrorCode = {
  invalidKey: 'IDEMPOTENCY_INVALID_KEY',
  invalidFingerprint: 'IDEMPOTENCY_INVALID_FINGERPRINT',
  invalidTime: 'IDEMPOTENCY_INVALID_TIME',
  invalidLimit: 'IDEMPOTENCY_INVALID_LIMIT',
  invalidOption: 'IDEMPOTENCY_INVALID_OPTION',
  unserializableResponse: 'IDEMPOTENCY_UNSERIALIZABLE_RESPONSE',
  databaseOpen: 'IDEMPOTENCY_DATABASE_OPEN',
  unrecognisedDatabase: 'IDEMPOTENCY_UNRECOGNISED_DATABASE',
  schemaMismatch: 'IDEMPOTENCY_SCHEMA_MISMATCH',
  storeClosed: 'IDEMPOTENCY_STORE_CLOSED',
  keyMissing: 'IDEMPOTENCY_KEY_MISSING',
  keyMalformed: 'IDEMPOTENCY_KEY_MALFORMED',
  keyReused: 'IDEMPOTENCY_KEY_REUSED',
  requestInProgress: 'IDEMPOTENCY_REQUEST_IN_PROGRESS',
  answerExpired: 'IDEMPOTENCY_ANSWER_EXPIRED',
  answerNotRecorded: 'IDEMPOTENCY_ANSWER_NOT_RECORDED',
  answerNotKept: 'IDEMPOTENCY_ANSWER_NOT_KEPT',
  bodyRefused: 'IDEMPOTENCY_BODY_REFUSED',
  scopeMalformed: 'IDEMPOTENCY_SCOPE_MALFORMED',
  requestSuperseded: 'IDEMPOTENCY_REQUEST_SUPERSEDED',
  transactionDeadlock: 'IDEMPOTENCY_TRANSACTION_DEADLOCK',
  requestRolledBack: 'IDEMPOTENCY_REQUEST_ROLLED_BACK',
  replicationUnconfirmed: 'IDEMPOTENCY_REPLICATION_UNCONFIRMED',
  deploymentRefused: 'IDEMPOTENCY_DEPLOYMENT_REFUSED',
  storeThreadExited: 'IDEMPOTENCY_STORE_THREAD_EXITED',
  transactionUnsupported: 'IDEMPOTENCY_TRANSACTION_UNSUPPORTED',
  outcomeUnknown: 'IDEMPOTENCY_OUTCOME_UNKNOWN',
  encryptionKeyMissing: 'IDEMPOTENCY_ENCRYPTION_KEY_MISSING',
  answerUnreadable: 'IDEMPOTENCY_ANSWER_UNREADABLE',
  stepSuperseded: 'IDEMPOTENCY_STEP_SUPERSEDED',
  stepNotStorable: 'IDEMPOTENCY_STEP_NOT_STORABLE',
} as const;

/** One of the values of {@link ErrorCode}. */
export type ErrorCode = (typeof ErrorCode)[keyof typeof ErrorCode];

/**
 * Base class of every error this library throws on purpose. `code` is stable across versions.
 *
 * @example
 * ```ts
 * try {
 *   store.expired(now, 1000);
 * } catch (error) {
 *   if (error instanceof IdempotencyError) console.error(error.code, error.message);
 * }
 * ```
 */
export class IdempotencyError extends Error {
  /** A stable, machine-readable code from {@link ErrorCode}. */
  readonly code: ErrorCode;

  /**
   * @param code - the stable code of this failure
   * @param message - a sentence for a human
   * @param options - the underlying error, when there is one
   */
  constructor(code: ErrorCode, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = new.target.name;
    this.code = code;
  }
}

/**
 * An argument was refused before anything was read or written. The database is unchanged.
 * Each field of the contract has its own subclass so callers can tell them apart.
 */
export class InvalidArgumentError extends IdempotencyError {}

/** The idempotency key is not a non-empty, well-formed string. */
export class InvalidKeyError extends InvalidArgumentError {
  /** @param message - what was wrong with the key */
  constructor(message: string) {
    super(ErrorCode.invalidKey, message);
  }
}

/** The payload fingerprint (fingerprint) is not a non-empty, well-formed string. */
export class InvalidFingerprintError extends InvalidArgumentError {
  /** @param message - what was wrong with the fingerprint */
  constructor(message: string) {
    super(ErrorCode.invalidFingerprint, message);
  }
}

/** A time (`expires` or `now`) is not a finite number. */
export class InvalidTimeError extends InvalidArgumentError {
  /** @param message - what was wrong with the time */
  constructor(message: string) {
    super(ErrorCode.invalidTime, message);
  }
}

/** A `limit` is not an integer in its allowed range. */
export class InvalidLimitError extends InvalidArgumentError {
  /** @param message - what was wrong with the limit */
  constructor(message: string) {
    super(ErrorCode.invalidLimit, message);
  }
}

/** An option (batch size, TTL, …) is out of range or of the wrong type. */
export class InvalidOptionError extends InvalidArgumentError {
  /** @param message - what was wrong with the option */
  constructor(message: string) {
    super(ErrorCode.invalidOption, message);
  }
}

/**
 * A response cannot be stored as JSON without changing it (`undefined`, a function, a symbol, a
 * BigInt, a cycle, NaN or ±Infinity, a Map or Set, a sparse array, …). `path` says where.
 */
export class UnserializableResponseError extends InvalidArgumentError {
  /** Where in the response the offending value sits, e.g. `$.items[2].price`. */
  readonly path: string;

  /**
   * @param path - where the offending value sits
   * @param reason - what the value is
   */
  constructor(path: string, reason: string) {
    super(
      ErrorCode.unserializableResponse,
      `response is not faithfully representable as JSON: ${reason} at ${path}`,
    );
    this.path = path;
  }
}

/**
 * The database could not be opened: a SQLite file that cannot be opened or is not a database, or
 * a PostgreSQL server that cannot be reached. Nothing was written.
 */
export class DatabaseOpenError extends IdempotencyError {
  /**
   * @param message - what went wrong, naming the path or the server
   * @param cause - the driver's error, when there is one
   */
  constructor(message: string, cause?: unknown) {
    super(ErrorCode.databaseOpen, message, { cause });
  }
}

/**
 * A store was given a database it cannot keep answers in as asked: an object that is not a drizzle
 * database over the store's driver, or one backed by something other than the file or client it
 * was opened on (a temporary database in place of a file, say, which would lose every answer when
 * it closed). Nothing was written.
 */
export class UnrecognisedDatabaseError extends IdempotencyError {
  /** @param message - what the store was given and what it expected */
  constructor(message: string) {
    super(ErrorCode.unrecognisedDatabase, message);
  }
}

/** A `keys` table exists but is not the one this library keeps. Nothing was written. */
export class SchemaMismatchError extends IdempotencyError {
  /** @param message - which columns differ */
  constructor(message: string) {
    super(ErrorCode.schemaMismatch, message);
  }
}

/** The store was used after `close()`. */
export class StoreClosedError extends IdempotencyError {
  constructor() {
    super(ErrorCode.storeClosed, 'the idempotency store is closed');
  }
}

/**
 * PostgreSQL committed a write locally but stopped waiting for the synchronous standby before it
 * confirmed it (`WARNING: canceling wait for synchronous replication`, e.g. after
 * `pg_cancel_backend` or a backend termination while the standby was away). The server reports
 * success, yet a failover to that standby loses the write: the store reports it as not done, so
 * an answer is never acknowledged that may not survive. Detected on node-postgres pools.
 */
export class ReplicationUnconfirmedError extends IdempotencyError {
  /** @param statement - the name of the store's statement whose commit was not confirmed */
  constructor(statement: string) {
    super(
      ErrorCode.replicationUnconfirmed,
      `the ${statement} statement committed on the primary but its synchronous standby never confirmed it: a failover may lose it`,
    );
  }
}

/**
 * Thrown by a handler (an HTTP route, a function under `makeIdempotent`) that cannot tell whether
 * its effect happened: it timed out calling a provider after sending the charge. The key is then
 * held as unrecorded instead of released, so no retry runs the effect again: retries get a 409
 * `outcome-unknown` problem (HTTP) or a `CallOutcomeUnknownError` (functions) until an operator
 * settles it, with `idem resolve KEY --answer FILE` (stores the answer the effect turned out to
 * have) or `idem release KEY` (frees the key, so the next retry runs).
 *
 * @example
 * ```ts
 * try {
 *   await provider.charge(order);
 * } catch (error) {
 *   if (isTimeout(error)) throw new OutcomeUnknownError('the charge timed out', { cause: error });
 *   throw error;
 * }
 * ```
 */
export class OutcomeUnknownError extends IdempotencyError {
  /**
   * @param message - what is unknown, for the logs (never sent to an HTTP client)
   * @param options - the underlying error, when there is one
   */
  constructor(message = 'the outcome of the work is unknown', options?: { cause?: unknown }) {
    super(ErrorCode.outcomeUnknown, message, options);
  }
}

/**
 * A stored answer is sealed under a key id the store's keyring does not hold (a key retired before
 * `idem rekey` re-sealed its rows, or a store opened without its `encryption` option). Nothing is
 * run again: the answer exists, it cannot be read until the key is given back. The message names
 * the key id, never key material.
 */
export class EncryptionKeyMissingError extends IdempotencyError {
  /** The key id the answer is sealed under. */
  readonly keyId: string;

  /** @param keyId - the key id the answer is sealed under */
  constructor(keyId: string) {
    super(
      ErrorCode.encryptionKeyMissing,
      `a stored answer is sealed under encryption key id ${JSON.stringify(keyId)}, which the keyring does not hold`,
    );
    this.keyId = keyId;
  }
}

/**
 * A sealed answer did not open: its authentication tag does not match (the bytes or the key under
 * its id changed, or it was copied from another row) or it is not a sealed value at all. Never
 * answered as garbage, and nothing is run again.
 */
export class AnswerUnreadableError extends IdempotencyError {
  /** The id of the row whose answer did not open. */
  readonly key: string;

  /**
   * @param key - the id of the row whose answer did not open
   * @param cause - what the cipher threw, if anything
   */
  constructor(key: string, cause?: unknown) {
    super(
      ErrorCode.answerUnreadable,
      `the stored answer of key ${JSON.stringify(key)} does not open with its encryption key: it was altered or sealed with other key bytes`,
      { cause },
    );
    this.key = key;
  }
}

/**
 * A step's record was refused: the key is no longer this owner's (its lease lapsed and another
 * owner took it over, or it was released by hand). The handler must stop: the new owner goes on
 * from the steps recorded so far. A step run in a transaction committed none of its writes.
 */
export class StepSupersededError extends IdempotencyError {
  /** The idempotency key, as stored. */
  readonly key: string;
  /** The step whose record was refused. */
  readonly step: string;

  /**
   * @param key - the key, as stored
   * @param step - the step's name
   */
  constructor(key: string, step: string) {
    super(
      ErrorCode.stepSuperseded,
      `step "${step}" was not recorded: the idempotency key was taken over or released while it ran`,
    );
    this.key = key;
    this.step = step;
  }
}

/**
 * A step ran but its result cannot be recorded: it has no faithful stored form, or its stored
 * form is larger than the step log allows. A step run in a transaction committed none of its
 * writes; any other step's effect happened and is run again by the next owner (with the same
 * derived key).
 */
export class StepNotStorableError extends IdempotencyError {
  /** The step whose result could not be recorded. */
  readonly step: string;

  /**
   * @param step - the step's name
   * @param reason - why its result cannot be stored
   * @param cause - the encoder's error, if any
   */
  constructor(step: string, reason: string, cause?: unknown) {
    super(ErrorCode.stepNotStorable, `the result of step "${step}" cannot be recorded: ${reason}`, {
      cause,
    });
    this.step = step;
  }
}
