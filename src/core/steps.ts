import { createHmac } from 'node:crypto';
import { encryptionOf, isSealed, sealedKeyId } from './encryption.js';
import {
  EncryptionKeyMissingError,
  InvalidOptionError,
  StepNotStorableError,
  StepSupersededError,
  UnserializableResponseError,
} from './errors.js';
import type { JsonValue } from './json.js';
import type { Ownership } from './ownership.js';
import { decodeResult, encodeResult } from './result-encoding.js';
import type { LeasedIdempotencyStore } from './store.js';
import type { KeyOwner, TransactionOutcome } from './transaction-runner.js';

/** The default cap on one step's stored result (and on the recorded arguments): 256 KiB of JSON text. */
export const DEFAULT_MAX_STEP_BYTES = 256 * 1024;

/** The shortest secret {@link StepLogOptions.secret} accepts, in bytes. */
export const MIN_STEP_SECRET_BYTES = 16;

/** Options of a step log (`sqliteSteps`, `pgSteps`, `mysqlSteps`, `libsqlSteps`, …). */
export interface StepLogOptions {
  /**
   * The key of the keyed hash that gives each step its derived key (see {@link StepContext.key}):
   * at least 16 bytes, the same in every process that serves the keys, and kept secret, so a
   * derived key reveals nothing of the client's key. Rotating it changes every derived key.
   */
  readonly secret: string | Uint8Array;
  /**
   * The largest stored form of one step's result, in bytes of JSON text; a larger one is refused
   * with `StepNotStorableError`. Default 256 KiB; an integer from 1 to 16 MiB.
   */
  readonly maxStepBytes?: number;
}

/**
 * What a dialect does for steps, on stored values: read the `steps` column of a pending key and
 * write it, fenced by the owner's token, alone or in a transaction with the step's own writes. The
 * recorded steps live in the key's row, so retention and erasure take them with the key. Built by
 * `interactiveStepRecorder` or `synchronousStepRecorder` (`core/step-recorders.ts`) from a
 * dialect's statements, or written whole where the transaction is a batch (D1).
 *
 * @typeParam TX - the drizzle transaction (or batch) a transactional step receives
 */
export type StepRecorder<TX> = StepRecorderOf<TX, true> | StepRecorderOf<TX, false>;

/**
 * A {@link StepRecorder} of one mode: a synchronous one (its transaction cannot span an `await`)
 * gets its stored value at once.
 */
interface StepRecorderOf<TX, Sync extends boolean> {
  /** The store of the keys. */
  readonly store: LeasedIdempotencyStore<unknown>;
  /** Whether a transactional step must be synchronous. */
  readonly synchronous: Sync;
  /** The stored `steps` column of the pending row of `key` claimed with `digest`, or `null`. */
  read(key: string, digest: string): Promise<string | null>;
  /** Writes `stored` on the owner's pending row; `false` when the row is no longer the owner's. */
  write(owner: KeyOwner, stored: string): Promise<boolean>;
  /**
   * Runs `body(tx)` and writes `stored(result)` on the owner's pending row in one transaction:
   * `{ committed: false }` (rolled back) when the row is no longer the owner's; what `body` or
   * `stored` throws rolls back and is rethrown.
   */
  transact<R>(
    owner: KeyOwner,
    body: (tx: TX) => R | Promise<R>,
    stored: (result: R) => Sync extends true ? string : string | Promise<string>,
  ): Promise<TransactionOutcome<R>>;
}

/**
 * A dialect's step log with its checked options: what `makeIdempotent` takes as `steps`. It reads
 * and writes the steps' JSON text; with the store's `encryption` on, the column holds it sealed
 * (AES-256-GCM under the keyring's current key, as the answers), and a record sealed under a key
 * id the keyring lacks rejects with `EncryptionKeyMissingError` instead of being read as absent.
 *
 * @typeParam TX - the drizzle transaction (or batch) a transactional step receives
 */
export interface StepLog<TX> {
  /** The store of the keys. */
  readonly store: LeasedIdempotencyStore<unknown>;
  /** Whether a transactional step must be synchronous (better-sqlite3, bun:sqlite, Durable Objects). */
  readonly synchronous: boolean;
  /** The checked cap on a step's stored result, in bytes. */
  readonly maxStepBytes: number;
  /** The recorded steps' JSON text of the pending row of `key` claimed with `digest`, or `null`. */
  read(key: string, digest: string): Promise<string | null>;
  /** Writes `text` on the owner's pending row; `false` when the row is no longer the owner's. */
  write(owner: KeyOwner, text: string): Promise<boolean>;
  /**
   * Runs `body(tx)` and writes `text(result)` on the owner's pending row in one transaction:
   * `{ committed: false }` (rolled back) when the row is no longer the owner's; what `body` or
   * `text` throws rolls back and is rethrown.
   */
  transact<R>(
    owner: KeyOwner,
    body: (tx: TX) => R | Promise<R>,
    text: (result: R) => string,
  ): Promise<TransactionOutcome<R>>;
  /** The derived key of step `name` of the stored key `key` (see {@link StepContext.key}). */
  deriveKey(key: string, name: string): string;
}

/** What a step's function receives. */
export interface StepContext {
  /** The step's name. */
  readonly name: string;
  /**
   * The step's derived key: a keyed hash (HMAC-SHA-256, base64url, 43 characters) of the stored
   * idempotency key (scope included) and the step's name. The same for every owner of the key,
   * distinct per step, revealing nothing of the client's key: give it to the provider the step
   * calls (Stripe's `Idempotency-Key`, a queue's deduplication id), so a step run again after a
   * crash reaches the provider with the same key.
   */
  readonly key: string;
}

/**
 * The step function a handler receives. `step(name, fn)` runs `fn` the first time the key reaches
 * that step and records its result under the key, fenced by the owner's token; every later owner
 * of the key (a retry after the lease lapsed, a completer's takeover) gets the recorded result
 * without running `fn`.
 *
 * @typeParam TX - the drizzle transaction of {@link Step.tx}
 */
export interface Step<TX> {
  /**
   * Runs `fn` once per key and name, or returns its recorded result. Names are unique within one
   * run of the handler. The result is stored as `makeIdempotent` stores results (a `Date`, a
   * BigInt, `undefined` and the special numbers come back as they were) and is returned in its
   * replayed form, so the first owner and a later one see the same value.
   *
   * @throws {@link StepSupersededError} when the record is refused (the key is no longer this
   * owner's); {@link StepNotStorableError} for a result with no stored form or too large; what
   * `fn` throws (nothing is recorded)
   */
  <T>(name: string, fn: (context: StepContext) => T | Promise<T>): Promise<T>;
  /**
   * As a plain step, but `fn(tx)` runs in the database transaction that records it: its writes
   * and its record commit together or not at all. On SQLite (better-sqlite3) `fn` is synchronous.
   */
  tx<T>(name: string, fn: (tx: TX, context: StepContext) => T | Promise<T>): Promise<T>;
  /** The derived key of step `name` (see {@link StepContext.key}), without running anything. */
  key(name: string): string;
  /** The names of the steps recorded so far on the key, in the order they were first run. */
  readonly recorded: readonly string[];
}

// The recorded form, one JSON text in the key's row: the encoded arguments of the call (for the
// completer) and the steps in the order they first ran. An array, not an object, so a step named
// like an integer keeps its place.
interface StepRecord {
  readonly args?: JsonValue;
  readonly steps: [string, JsonValue][];
}

/**
 * Parses the recorded steps' text of a key.
 *
 * @param text - the `steps` column of the key's row
 * @returns the arguments recorded with the first step (absent for a call that recorded none) and
 *   the steps' names and stored results in the order they first ran
 */
export function parseStepRecord(text: string | null): StepRecord {
  if (text === null) return { steps: [] };
  const parsed = JSON.parse(text) as StepRecord;
  return { ...parsed, steps: Array.isArray(parsed.steps) ? parsed.steps : [] };
}

/**
 * Checks `options` and completes a dialect's recorder into a {@link StepLog}.
 *
 * @throws {@link InvalidOptionError} for a missing or short secret or a bad `maxStepBytes`
 */
export function stepLog<TX>(recorder: StepRecorder<TX>, options: StepLogOptions): StepLog<TX> {
  if (typeof options !== 'object' || options === null) {
    throw new InvalidOptionError('steps need options with a secret of at least 16 bytes');
  }
  const { secret } = options;
  const bytes =
    typeof secret === 'string'
      ? Buffer.from(secret, 'utf8')
      : secret instanceof Uint8Array
        ? Buffer.from(secret)
        : undefined;
  if (bytes === undefined || bytes.length < MIN_STEP_SECRET_BYTES) {
    throw new InvalidOptionError(
      `secret must be a string or Uint8Array of at least ${MIN_STEP_SECRET_BYTES} bytes`,
    );
  }
  const maxStepBytes = options.maxStepBytes ?? DEFAULT_MAX_STEP_BYTES;
  if (!Number.isInteger(maxStepBytes) || maxStepBytes < 1 || maxStepBytes > 16 * 1024 * 1024) {
    throw new InvalidOptionError('maxStepBytes must be an integer from 1 to 16 MiB');
  }
  const derive = (key: string, name: string) =>
    createHmac('sha256', bytes).update(key).update('\u0000').update(name).digest('base64url');
  return { ...sealedSteps(recorder), maxStepBytes, deriveKey: derive };
}

// The reads and writes of a recorder on the steps' JSON text, sealed and opened as the store
// seals its answers: bound to the key's row, under the keyring's current key.
function sealedSteps<TX>(
  recorder: StepRecorder<TX>,
): Pick<StepLog<TX>, 'store' | 'synchronous' | 'read' | 'write' | 'transact'> {
  const encryption = encryptionOf(recorder.store);
  const open = async (key: string, stored: string | null): Promise<string | null> => {
    if (stored === null) return null;
    if (encryption !== undefined) return encryption.open(key, stored);
    // A record sealed while encryption was on, read by a store opened without it.
    if (isSealed(stored)) throw new EncryptionKeyMissingError(sealedKeyId(stored) ?? '');
    return stored;
  };
  const common = {
    store: recorder.store,
    read: async (key: string, digest: string) => open(key, await recorder.read(key, digest)),
    write: async (owner: KeyOwner, text: string) =>
      recorder.write(
        owner,
        encryption === undefined ? text : await encryption.seal(owner.key, text),
      ),
  };
  if (recorder.synchronous) {
    return {
      ...common,
      synchronous: true,
      transact: (owner, body, text) =>
        recorder.transact(owner, body, (result) =>
          encryption === undefined ? text(result) : encryption.sealSync(owner.key, text(result)),
        ),
    };
  }
  return {
    ...common,
    synchronous: false,
    transact: (owner, body, text) =>
      recorder.transact(owner, body, (result) =>
        encryption === undefined ? text(result) : encryption.seal(owner.key, text(result)),
      ),
  };
}

function assertStepName(name: unknown): asserts name is string {
  if (typeof name !== 'string' || name.length === 0 || name.length > 200) {
    throw new InvalidOptionError(
      'a step name must be a non-empty string of at most 200 characters',
    );
  }
}

/**
 * One owner's run of a stepped handler: the step function it hands the handler, and what the
 * front end needs afterwards (whether any step is recorded, which decides between releasing the
 * key and lapsing its lease on failure).
 */
export interface StepSession<TX> {
  /** The step function for the handler. */
  readonly step: Step<TX>;
  /** Whether the key holds at least one recorded step (from this owner or an earlier one). */
  hasRecorded(): boolean;
}

/**
 * Starts a run of a stepped handler on a claimed key: reads the steps earlier owners recorded
 * (only after a takeover: a fresh key has none) and returns the step function.
 *
 * @param log - the dialect's step log
 * @param ownership - the claim of the key
 * @param args - the call's arguments in their stored form, recorded with the first step so the
 *   completer can drive the key to its answer; `undefined` when there are none to record
 */
export async function startSteps<TX>(
  log: StepLog<TX>,
  ownership: Ownership,
  args: JsonValue | undefined,
): Promise<StepSession<TX>> {
  const { owner } = ownership;
  const record = ownership.takenOver
    ? parseStepRecord(await log.read(owner.key, owner.fingerprint))
    : { steps: [] };
  const entries: [string, JsonValue][] = [...record.steps];
  const results = new Map(entries);
  const recordedArgs = record.args ?? args;
  const used = new Set<string>();

  const sized = (name: string, value: JsonValue): string => {
    const text = JSON.stringify(value);
    if (Buffer.byteLength(text, 'utf8') > log.maxStepBytes) {
      throw new StepNotStorableError(
        name,
        `its stored form is larger than maxStepBytes (${log.maxStepBytes} bytes)`,
      );
    }
    return text;
  };
  const encode = (name: string, result: unknown): JsonValue => {
    try {
      const encoded = encodeResult(result);
      sized(name, encoded);
      return encoded;
    } catch (error) {
      if (error instanceof UnserializableResponseError) {
        throw new StepNotStorableError(name, error.message, error);
      }
      throw error;
    }
  };
  const textWith = (name: string, encoded: JsonValue): string =>
    JSON.stringify({
      ...(recordedArgs === undefined ? {} : { args: recordedArgs }),
      steps: [...entries, [name, encoded]],
    });
  const begin = (name: unknown): { replay: boolean; value: unknown; context: StepContext } => {
    assertStepName(name);
    if (used.has(name)) {
      throw new InvalidOptionError(
        `step "${name}" already ran in this call: step names must be unique within a handler`,
      );
    }
    used.add(name);
    const stored = results.get(name);
    const context = { name, key: log.deriveKey(owner.key, name) };
    return stored === undefined
      ? { replay: false, value: undefined, context }
      : { replay: true, value: decodeResult(stored), context };
  };
  const remember = (name: string, encoded: JsonValue): unknown => {
    entries.push([name, encoded]);
    results.set(name, encoded);
    return decodeResult(encoded);
  };

  const run = async <T>(name: string, fn: (context: StepContext) => T | Promise<T>) => {
    const started = begin(name);
    if (started.replay) return started.value as T;
    const encoded = encode(name, await fn(started.context));
    if (!(await log.write(owner, textWith(name, encoded)))) {
      throw new StepSupersededError(owner.key, name);
    }
    return remember(name, encoded) as T;
  };
  const tx = async <T>(name: string, fn: (tx: TX, context: StepContext) => T | Promise<T>) => {
    const started = begin(name);
    if (started.replay) return started.value as T;
    let encoded: JsonValue | undefined;
    const outcome = await log.transact(
      owner,
      (transaction) => fn(transaction, started.context),
      (result) => {
        encoded = encode(name, result);
        return textWith(name, encoded);
      },
    );
    if (!outcome.committed || encoded === undefined) {
      throw new StepSupersededError(owner.key, name);
    }
    return remember(name, encoded) as T;
  };
  const step = Object.assign(run, {
    tx,
    key: (name: string) => {
      assertStepName(name);
      return log.deriveKey(owner.key, name);
    },
  });
  Object.defineProperty(step, 'recorded', { get: () => entries.map(([name]) => name) });
  return { step: step as Step<TX>, hasRecorded: () => entries.length > 0 };
}
