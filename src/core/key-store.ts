import {
  type AnswerSealing,
  answerSealing,
  type Encryption,
  type Keyring,
  sealedKeyId,
} from './encryption.js';
import {
  type EraseOptions,
  type EraseResult,
  type RekeyOptions,
  type RekeyResult,
  type SealingReport,
  scopePrefix,
} from './erasure.js';
import { InvalidOptionError, StoreClosedError } from './errors.js';
import { nextFencingToken } from './fencing-token.js';
import { parseResponse, serializeResponse } from './json.js';
import {
  acquiredOutcome,
  assertFencingToken,
  existingOutcome,
  leaseDeadline,
  MAX_PENDING_LIMIT,
  pendingLimit,
  pendingPrefix,
  readOutcome,
  toPendingKey,
} from './lease.js';
import { compareKeys } from './order.js';
import { holdsOwnAnswer, type KeyRow, toRecord } from './record.js';
import { countByStatus, KeyStatus } from './status.js';
import type {
  AcquireOptions,
  AcquireResult,
  IdempotencyRecord,
  LeasedIdempotencyStore,
  LeaseStats,
  MaybePromise,
  PendingKey,
  PendingKeysOptions,
  ReleasePendingResult,
  StatusCounts,
} from './store.js';
import { isThenable, andThen as then } from './thenable.js';
import {
  assertFingerprint,
  assertIntegerOption,
  assertKey,
  assertLimit,
  assertTime,
  DEFAULT_LIMIT,
  MAX_BATCH_SIZE,
} from './validation.js';

const DEFAULT_ERASE_BATCH = 500;

/**
 * How a store answers: `'sync'` with plain values (better-sqlite3, bun:sqlite, a Durable Object's
 * SQLite), `'async'` with promises (libSQL, D1, PostgreSQL, MySQL).
 */
export type Mode = 'sync' | 'async';

/** A `T` as a store of mode `M` answers it: `T` itself when `'sync'`, a promise of it when `'async'`. */
export type ModeResult<M extends Mode, T> = M extends 'sync' ? T : Promise<T>;

/**
 * What a dialect's `acquire` statements found: the fencing token of the row they inserted (the
 * fresh token they were given) or took over (another one), or else the row as it stands
 * (`undefined` when it was deleted in between, so the key is new again and the store tries once
 * more).
 */
export type AcquireStep =
  | { readonly attempt: number | string }
  | { readonly row: KeyRow | undefined };

/**
 * What a dialect's `releasePending` statements found: the pending row deleted, or else the row of
 * the key as the delete left it (`undefined` when there is none).
 */
type PendingRelease =
  | { readonly released: true }
  | { readonly released: false; readonly row: KeyRow | undefined };

/** The checked options of `pendingKeys`. */
interface PendingQuery {
  /** The moment lease states are judged at. */
  readonly now: number;
  /** Only the rows that need an operator's look. */
  readonly stale: boolean;
  /** At most this many rows. */
  readonly limit: number;
  /** Only ids starting with this text; `''` for all. */
  readonly prefix: string;
}

/** A `GROUP BY status` row of the `stats` statement; counts as the driver gives them. */
export interface StatsRow {
  readonly status: string;
  /** All rows of the status. */
  readonly count: number | string;
  /** The rows with `expires <= now`. */
  readonly past: number | string;
  /** The rows not marked unrecorded whose lease ended by `now`. */
  readonly lapsed: number | string | null;
  /** The rows marked unrecorded. */
  readonly unrecorded: number | string | null;
}

/** The lease a claim writes: when the answer expires, the clock it reads, the lease's end, the token. */
interface ClaimLease {
  readonly expires: number;
  readonly now: number;
  readonly leaseUntil: number;
  readonly token: number;
}

/**
 * One dialect's statements, run as they are: the values are already checked and the store is
 * open. A write answers the number of rows it changed; a read, the rows as the driver gives them;
 * each as mode `M` answers (see {@link Answer}). The dialect keeps what is its own here (how it
 * runs a statement, retries a deadlock victim, holds its write lock, caches answers or checkpoints
 * its log); {@link KeyStore} checks the arguments and reads the answers.
 *
 * @typeParam M - whether the statements answer plain values or promises
 */
export interface KeyStatementsOf<M extends Mode> {
  /** Inserts `key` as pending unless it exists. */
  reserve(key: string, fingerprint: string, expires: number): ModeResult<M, number>;
  /** Stores the serialized `response` on the pending row of `key` and `fingerprint`. */
  finish(key: string, fingerprint: string, response: string): ModeResult<M, number>;
  /** As `finish`, only while the row carries `attempt`. */
  finishFenced(
    key: string,
    fingerprint: string,
    response: string,
    attempt: number,
  ): ModeResult<M, number>;
  /** Deletes the pending row of `key` and `fingerprint`. */
  release(key: string, fingerprint: string): ModeResult<M, number>;
  /** As `release`, only while the row carries `attempt` and is not marked unrecorded. */
  releaseFenced(key: string, fingerprint: string, attempt: number): ModeResult<M, number>;
  /** Moves the lease of the owner holding `attempt` to `leaseUntil`. */
  renew(
    key: string,
    fingerprint: string,
    attempt: number,
    leaseUntil: number,
  ): ModeResult<M, number>;
  /** Marks the pending row held with `attempt` as unrecorded and drops its lease. */
  markUnrecorded(key: string, fingerprint: string, attempt: number): ModeResult<M, number>;
  /**
   * Inserts the key with the fencing token `token`, or takes over its lapsed lease with the token
   * `takeoverToken` computes from the row's and `token`, or reads what is there.
   */
  acquire(key: string, fingerprint: string, lease: ClaimLease): ModeResult<M, AcquireStep>;
  /**
   * Inserts a missing key as `acquire` does, or else answers the row as it stands, neither locked
   * nor written (`undefined` when the statement saw none): a fresh key in one round trip, where a
   * read first and then `acquire` take two. Where a dialect has it, `acquire` starts with it.
   */
  insertOrGet?(
    key: string,
    fingerprint: string,
    lease: { readonly expires: number; readonly leaseUntil: number; readonly token: number },
  ): ModeResult<M, AcquireStep>;
  /**
   * Replaces the done row of `key` whose `expires <= now` with a pending one of `fingerprint`, its
   * lease and a fencing token above the row's and `token`, in one statement; answers that token,
   * or `undefined` when no such row was there (already replaced, swept, or not expired).
   */
  replaceExpired(
    key: string,
    fingerprint: string,
    lease: ClaimLease,
  ): ModeResult<M, number | string | undefined>;
  /** The pending rows, ascending by key. */
  pendingKeys(query: PendingQuery): ModeResult<M, readonly KeyRow[]>;
  /** Deletes the pending row of `key` (of `fingerprint` when given), whatever its lease. */
  releasePending(key: string, fingerprint: string | undefined): ModeResult<M, PendingRelease>;
  /** The stored answer of the done row of `key` with `expires > now`, as text. */
  fetch(key: string, now: number): ModeResult<M, string | null | undefined>;
  /** The row of `key`. */
  get(key: string): ModeResult<M, KeyRow | undefined>;
  /** The ids of done rows with `expires <= now`, ascending, at most `limit`. */
  expired(now: number, limit: number): ModeResult<M, readonly { readonly id: string }[]>;
  /** Deletes what `expired` would list and answers the ids it deleted, in any order. */
  purge(now: number, limit: number): ModeResult<M, readonly { readonly id: string }[]>;
  /** Deletes up to `batchSize` expired answers in index order; the number deleted. */
  sweepBatch(now: number, batchSize: number): ModeResult<M, number>;
  /**
   * Deletes up to `limit` done rows whose id starts with `prefix`, lowest ids first, repeating the
   * condition on each deleted row; answers the ids it deleted, in any order.
   */
  eraseBatch(prefix: string, limit: number): ModeResult<M, readonly { readonly id: string }[]>;
  /** Up to `limit` done rows with an id above `after`, ascending: their id and stored answer. */
  answers(
    after: string,
    limit: number,
  ): ModeResult<M, readonly { readonly id: string; readonly response: string | null }[]>;
  /** Replaces the stored answer of the done row `id` while it is still `previous`; rows changed. */
  reseal(id: string, previous: string, response: string): ModeResult<M, number>;
  /** Up to `limit` rows with recorded steps and an id above `after`, ascending: id and steps. */
  stepRecords(
    after: string,
    limit: number,
  ): ModeResult<M, readonly { readonly id: string; readonly steps: string | null }[]>;
  /** Replaces the recorded steps of row `id` while they are still `previous`; rows changed. */
  resealSteps(id: string, previous: string, steps: string): ModeResult<M, number>;
  /** The `GROUP BY status` counts. */
  counts(): ModeResult<M, readonly { readonly status: string; readonly count: number | string }[]>;
  /** The `GROUP BY status` counts at `now`. */
  stats(now: number): ModeResult<M, readonly StatsRow[]>;
  /** Called once by the first `close()`. */
  close?(): unknown;
  /** Checks the options of `pendingKeys`; {@link readPendingOptions} when not given. */
  readPendingOptions?(options: PendingKeysOptions): PendingQuery;
}

/**
 * Checks the options of `pendingKeys`, the same on every dialect: an object, `now` a finite time,
 * `stale` a boolean (`false` when not given), `limit` within range (100 when not given), `prefix`
 * a well-formed string (`''` when not given). Nothing is read loosely: `stale: 'no'` would
 * otherwise list the stale rows only.
 *
 * @throws {@link InvalidOptionError} for options that are not an object, or a `stale` that is not
 * a boolean
 * @throws {@link InvalidTimeError} for a `now` that is not a finite number
 * @throws {@link InvalidLimitError} for a `limit` out of range
 */
function readPendingOptions(options: PendingKeysOptions): PendingQuery {
  if (typeof options !== 'object' || options === null) {
    throw new InvalidOptionError('pendingKeys takes { now, stale?, limit?, prefix? }');
  }
  const { now, stale = false } = options;
  assertTime(now, 'now');
  if (typeof stale !== 'boolean') {
    throw new InvalidOptionError(`stale must be a boolean, got ${typeof stale}`);
  }
  return { now, stale, limit: pendingLimit(options.limit), prefix: pendingPrefix(options) };
}

const isOne = (changed: number): boolean => changed === 1;

function noop(): void {}
// A done answer past its retention, of any fingerprint (its request is over and no longer
// replayed, so another payload is no misuse of the key): what `replaceExpired` lets a claim
// replace.
const isExpiredAnswer = <T>(outcome: AcquireResult<T>, now: number): boolean =>
  (outcome.status === 'done' || outcome.status === 'mismatch') &&
  outcome.record.status === KeyStatus.done &&
  outcome.record.expires <= now;

/**
 * Runs `step` until it answers `false`: in a loop while it answers at once (no stack grows with
 * the number of rows on a synchronous store), chained while it answers promises.
 */
function repeat(step: () => MaybePromise<boolean>): MaybePromise<void> {
  for (;;) {
    const more = step();
    if (isThenable(more)) {
      return Promise.resolve(more).then((again) => (again ? repeat(step) : undefined));
    }
    if (!more) return;
  }
}

/**
 * A step for {@link repeat} that visits every stored answer in id order, reading `batchSize` rows
 * at a time, and calls `visit` with each row's id and stored value.
 */
function answerScan(
  statements: KeyStatementsOf<Mode>,
  batchSize: number,
  visit: (id: string, stored: string) => MaybePromise<unknown>,
): () => MaybePromise<boolean> {
  return storedScan(
    (after) =>
      then(statements.answers(after, batchSize), (rows) =>
        rows.map((row) => ({ id: row.id, stored: row.response })),
      ),
    batchSize,
    visit,
  );
}

// Every row's recorded steps, in batches of `batchSize`, in id order.
function stepScan(
  statements: KeyStatementsOf<Mode>,
  batchSize: number,
  visit: (id: string, stored: string) => MaybePromise<unknown>,
): () => MaybePromise<boolean> {
  return storedScan(
    (after) =>
      then(statements.stepRecords(after, batchSize), (rows) =>
        rows.map((row) => ({ id: row.id, stored: row.steps })),
      ),
    batchSize,
    visit,
  );
}

// One stored value per row, read by `read` in batches of `batchSize` after the last id seen.
function storedScan(
  read: (
    after: string,
  ) => MaybePromise<readonly { readonly id: string; readonly stored: string | null }[]>,
  batchSize: number,
  visit: (id: string, stored: string) => MaybePromise<unknown>,
): () => MaybePromise<boolean> {
  let rows: readonly { readonly id: string; readonly stored: string | null }[] = [];
  let at = 0;
  let after = '';
  let last = false;
  return () => {
    const row = rows[at];
    if (row === undefined) {
      if (last) return false;
      return then(read(after), (batch) => {
        rows = batch;
        at = 0;
        last = batch.length < batchSize;
        after = batch[batch.length - 1]?.id ?? after;
        return batch.length > 0;
      });
    }
    at++;
    return row.stored === null ? true : then(visit(row.id, row.stored), () => true);
  };
}

/**
 * How an operation's body is run: a synchronous store runs it as it is; an asynchronous one runs
 * it in an `async` function, so a bad argument rejects the returned promise instead of throwing.
 */
const RUNNERS: { readonly [M in Mode]: <R>(body: () => MaybePromise<R>) => MaybePromise<R> } = {
  sync: (body) => body(),
  async: async (body) => body(),
};

/**
 * A {@link LeasedIdempotencyStore} over one dialect's {@link KeyStatementsOf | statements}, in
 * either mode. Each operation checks its arguments, in the same order on every dialect, then
 * refuses to run on a closed store, then runs the dialect's statements and turns their answer into
 * the result; so every dialect, synchronous or not, throws the same typed errors and answers
 * alike. Use it through {@link SyncIdempotencyStore} or {@link AsyncIdempotencyStore}.
 *
 * @typeParam T - the type of the stored responses
 * @typeParam M - whether the store answers plain values or promises
 */
export class KeyStore<T, M extends Mode> implements LeasedIdempotencyStore<T> {
  readonly #statements: KeyStatementsOf<Mode>;
  readonly #runner: <R>(body: () => MaybePromise<R>) => ModeResult<M, R>;
  // The operations called and not yet settled: `close()` waits for them before it closes the
  // connection, since one may still have a statement to send (a fenced finish's read, a takeover
  // after a read). A synchronous store settles each before the next call, so it never has any.
  readonly #inFlight = new Set<Promise<unknown>>();
  readonly #sealing: AnswerSealing;
  #closed = false;
  #closing: MaybePromise<unknown> | undefined;

  /**
   * @param statements - the dialect's statements, see {@link KeyStatementsOf}
   * @param mode - whether `statements` answer plain values or promises
   * @param encryption - the keyring answers are sealed with; stored as JSON text when absent
   * @throws {@link InvalidOptionError} for a keyring that is not well formed
   */
  constructor(
    statements: KeyStatementsOf<M> | KeyStatementsOf<Mode>,
    mode: M,
    encryption?: Keyring,
  ) {
    this.#statements = statements as KeyStatementsOf<Mode>;
    this.#runner = RUNNERS[mode] as <R>(body: () => MaybePromise<R>) => ModeResult<M, R>;
    this.#sealing = answerSealing(encryption, mode === 'sync');
  }

  /** What seals this store's answers and keys its fingerprints; `undefined` with encryption off. */
  get encryption(): Encryption | undefined {
    return this.#sealing.encryption;
  }

  // The row with its answer opened (JSON text again). A row of another fingerprint keeps no
  // answer: the caller cannot replay it, so it is neither opened nor handed on.
  #openRow(row: KeyRow | undefined, fingerprint?: string): MaybePromise<KeyRow | undefined> {
    if (row === undefined || row.response == null) return row;
    if (fingerprint !== undefined && row.fingerprint !== fingerprint)
      return { ...row, response: null };
    return then(this.#sealing.open(row.id, row.response), (response) => ({ ...row, response }));
  }

  // Runs an operation's body and keeps its promise, if any, among those `close()` waits for.
  #run<R>(body: () => MaybePromise<R>): ModeResult<M, R> {
    const answer = this.#runner(body);
    if (isThenable(answer)) {
      const settled = Promise.resolve(answer).then(noop, noop);
      this.#inFlight.add(settled);
      void settled.then(() => this.#inFlight.delete(settled));
    }
    return answer;
  }

  #open(): KeyStatementsOf<Mode> {
    if (this.#closed) throw new StoreClosedError();
    return this.#statements;
  }

  #checkKey(key: unknown): asserts key is string {
    assertKey(key);
  }

  #checkFingerprint(fingerprint: unknown): asserts fingerprint is string {
    assertFingerprint(fingerprint);
  }

  /** {@inheritDoc IdempotencyStore.reserve} */
  reserve(key: string, fingerprint: string, expires: number): ModeResult<M, boolean> {
    return this.#run(() => {
      this.#checkKey(key);
      this.#checkFingerprint(fingerprint);
      assertTime(expires, 'expires');
      return then(this.#open().reserve(key, fingerprint, expires), isOne);
    });
  }

  /** {@inheritDoc LeasedIdempotencyStore.finish} */
  finish(key: string, fingerprint: string, response: T, attempt?: number): ModeResult<M, boolean> {
    return this.#run(() => {
      this.#checkKey(key);
      this.#checkFingerprint(fingerprint);
      if (attempt !== undefined) assertFencingToken(attempt);
      const statements = this.#open();
      const serialized = serializeResponse(response);
      return then(this.#sealing.seal(key, serialized), (text) => {
        if (attempt === undefined) return then(statements.finish(key, fingerprint, text), isOne);
        // A repeated finish compares answers opened: sealing the same answer twice never gives the
        // same text (a fresh IV each time), so the stored text alone cannot tell it is this one.
        return then(statements.finishFenced(key, fingerprint, text, attempt), (changed) =>
          changed === 1
            ? true
            : then(statements.get(key), (row) =>
                then(this.#openRow(row, fingerprint), (opened) =>
                  holdsOwnAnswer(opened, fingerprint, attempt, serialized),
                ),
              ),
        );
      });
    });
  }

  /** {@inheritDoc LeasedIdempotencyStore.acquire} */
  acquire(
    key: string,
    fingerprint: string,
    options: AcquireOptions,
  ): ModeResult<M, AcquireResult<T>> {
    return this.#run(() => {
      this.#checkKey(key);
      this.#checkFingerprint(fingerprint);
      const leaseUntil = leaseDeadline(options);
      const { expires, now } = options;
      const replace = options.replaceExpired === true;
      const statements = this.#open();
      // Read before writing: a replay or a live lease answers from the row and writes nothing.
      const decide = (row: KeyRow | undefined) =>
        then(this.#openRow(row, fingerprint), (opened) => {
          const read = readOutcome<T>(opened, fingerprint, now);
          if (read !== undefined && !(replace && isExpiredAnswer(read, now))) return read;
          return this.#claim(statements, key, fingerprint, { expires, now, leaseUntil, replace });
        });
      if (statements.insertOrGet === undefined) return then(statements.get(key), decide);
      const token = nextFencingToken();
      return then(
        statements.insertOrGet(key, fingerprint, { expires, leaseUntil, token }),
        (step) =>
          'attempt' in step
            ? acquiredOutcome<T>(step.attempt, token, leaseUntil)
            : decide(step.row),
      );
    });
  }

  // The statement either owns the row or leaves it as it was; what is there is then read. A row
  // deleted in between (released, purged) makes the key new again: try once more.
  // An expired answer, with `replace`, is replaced by one fenced statement; when it changed nothing
  // (a concurrent claim replaced it first, or a sweep deleted it) the claim starts over.
  #claim(
    statements: KeyStatementsOf<Mode>,
    key: string,
    fingerprint: string,
    claim: { expires: number; now: number; leaseUntil: number; replace: boolean },
  ): MaybePromise<AcquireResult<T>> {
    const { expires, now, leaseUntil } = claim;
    const token = nextFencingToken();
    return then(
      statements.acquire(key, fingerprint, { expires, now, leaseUntil, token }),
      (step) => {
        if ('attempt' in step) return acquiredOutcome<T>(step.attempt, token, leaseUntil);
        if (step.row === undefined) return this.#claim(statements, key, fingerprint, claim);
        return then(this.#openRow(step.row, fingerprint), (row) =>
          this.#decideExisting(statements, key, fingerprint, { ...claim, token }, row as KeyRow),
        );
      },
    );
  }

  // What a claim answers for the row its write found (its answer opened): that row's outcome, or,
  // with `replace` and an expired answer, the replacement's.
  #decideExisting(
    statements: KeyStatementsOf<Mode>,
    key: string,
    digest: string,
    claim: { expires: number; now: number; leaseUntil: number; replace: boolean; token: number },
    row: KeyRow,
  ): MaybePromise<AcquireResult<T>> {
    const { expires, now, leaseUntil, token } = claim;
    const outcome = existingOutcome<T>(row, digest);
    if (!(claim.replace && isExpiredAnswer(outcome, now))) return outcome;
    return then(
      statements.replaceExpired(key, digest, { expires, now, leaseUntil, token }),
      (attempt): MaybePromise<AcquireResult<T>> =>
        attempt === undefined
          ? this.#claim(statements, key, digest, claim)
          : // A new request, not a takeover: nothing of this caller's ran under the old row.
            { ...acquiredOutcome<T>(attempt, token, leaseUntil), takenOver: false },
    );
  }

  /** {@inheritDoc LeasedIdempotencyStore.renew} */
  renew(
    key: string,
    fingerprint: string,
    attempt: number,
    leaseUntil: number,
  ): ModeResult<M, boolean> {
    return this.#run(() => {
      this.#checkKey(key);
      this.#checkFingerprint(fingerprint);
      assertFencingToken(attempt);
      assertTime(leaseUntil, 'leaseUntil');
      return then(this.#open().renew(key, fingerprint, attempt, leaseUntil), isOne);
    });
  }

  /** {@inheritDoc LeasedIdempotencyStore.markUnrecorded} */
  markUnrecorded(key: string, fingerprint: string, attempt: number): ModeResult<M, boolean> {
    return this.#run(() => {
      this.#checkKey(key);
      this.#checkFingerprint(fingerprint);
      assertFencingToken(attempt);
      return then(this.#open().markUnrecorded(key, fingerprint, attempt), isOne);
    });
  }

  /** {@inheritDoc LeasedIdempotencyStore.pendingKeys} */
  pendingKeys(options: PendingKeysOptions): ModeResult<M, PendingKey[]> {
    return this.#run(() => {
      const query = (this.#statements.readPendingOptions ?? readPendingOptions)(options);
      return then(this.#open().pendingKeys(query), (rows) =>
        rows.map((row) => toPendingKey(row, query.now)),
      );
    });
  }

  /** {@inheritDoc LeasedIdempotencyStore.releasePending} */
  releasePending(key: string, fingerprint?: string): ModeResult<M, ReleasePendingResult> {
    return this.#run(() => {
      this.#checkKey(key);
      if (fingerprint !== undefined) this.#checkFingerprint(fingerprint);
      return then(this.#open().releasePending(key, fingerprint), (found) => {
        if (found.released) return 'released';
        if (found.row === undefined) return 'missing';
        return found.row.status === KeyStatus.done ? 'done' : 'mismatch';
      });
    });
  }

  /** {@inheritDoc IdempotencyStore.fetch} */
  fetch(key: string, now: number): ModeResult<M, T | null> {
    return this.#run(() => {
      this.#checkKey(key);
      assertTime(now, 'now');
      return then(this.#open().fetch(key, now), (stored) =>
        stored == null
          ? null
          : then(this.#sealing.open(key, stored), (text) => parseResponse<T>(text)),
      );
    });
  }

  /** {@inheritDoc IdempotencyStore.expired} */
  expired(now: number, limit: number = DEFAULT_LIMIT): ModeResult<M, string[]> {
    return this.#run(() => {
      assertLimit(limit);
      assertTime(now, 'now');
      return then(this.#open().expired(now, limit), (rows) => rows.map((row) => row.id));
    });
  }

  /** {@inheritDoc IdempotencyStore.purge} */
  purge(now: number, limit: number = DEFAULT_LIMIT): ModeResult<M, string[]> {
    return this.#run(() => {
      assertLimit(limit);
      assertTime(now, 'now');
      return then(this.#open().purge(now, limit), (rows) =>
        rows.map((row) => row.id).sort(compareKeys),
      );
    });
  }

  /**
   * Erases every stored answer of one scope (a customer, a tenant: the ids `storedId(scope, key)`
   * gives), in batches of `batchSize` (each one statement or one short transaction, so live traffic
   * waits for no long lock). Pending rows of the scope are not touched (their request is still
   * running, and deleting them would let a retry run it twice): they are listed instead, so the
   * erasure can be run again once they are done. A retry of an erased key is a new request.
   *
   * @example
   * ```ts
   * const { erased, pending } = await store.erase({ scope: 'customer-7' });
   * ```
   * @throws {@link InvalidOptionError} for a scope that is not a non-empty, well-formed string
   * @throws {@link InvalidLimitError} for a `batchSize` outside 1 to 10,000
   */
  erase(options: EraseOptions): ModeResult<M, EraseResult> {
    return this.#run(() => {
      const prefix = scopePrefix(options?.scope);
      const batchSize = options.batchSize ?? DEFAULT_ERASE_BATCH;
      assertIntegerOption(batchSize, 'batchSize', 1, MAX_BATCH_SIZE);
      const statements = this.#open();
      const erased: string[] = [];
      const unscoped = (id: string) => id.slice(prefix.length);
      const batch = () =>
        then(statements.eraseBatch(prefix, batchSize), (rows) => {
          for (const row of rows) erased.push(unscoped(row.id));
          return rows.length === batchSize;
        });
      const query = { now: 0, stale: false, limit: MAX_PENDING_LIMIT, prefix };
      return then(repeat(batch), () =>
        then(statements.pendingKeys(query), (pending) => ({
          erased: erased.sort(compareKeys),
          pending: pending.map((row) => unscoped(row.id)),
        })),
      );
    });
  }

  /**
   * Re-seals every stored answer and step record that is not sealed under the keyring's current
   * key (sealed under a retired key, or plain JSON kept before encryption was turned on), in
   * batches of `batchSize` rows in id order. Each value is replaced only while it is still the
   * value read, so one recorded or erased meanwhile is left as it is. Values that do not open
   * (their key id is not in the keyring, or they fail authentication) are counted and left
   * unchanged.
   *
   * @example
   * ```ts
   * const { resealed, unreadable } = await store.rekey();
   * ```
   * @throws {@link InvalidOptionError} on a store opened without `encryption`
   * @throws {@link InvalidLimitError} for a `batchSize` outside 1 to 10,000
   */
  rekey(options: RekeyOptions = {}): ModeResult<M, RekeyResult> {
    return this.#run(() => {
      const encryption = this.#sealing.encryption;
      if (encryption === undefined) {
        throw new InvalidOptionError('rekey needs a store opened with an encryption keyring');
      }
      const batchSize = options.batchSize ?? DEFAULT_ERASE_BATCH;
      assertIntegerOption(batchSize, 'batchSize', 1, MAX_BATCH_SIZE);
      const statements = this.#open();
      const result = { resealed: 0, current: 0, unreadable: [] as string[] };
      // The answer's JSON text, or `undefined` when it does not open (the id is then reported).
      const opened = (id: string, stored: string): MaybePromise<string | undefined> => {
        try {
          const text = this.#sealing.open(id, stored);
          return isThenable(text) ? Promise.resolve(text).catch(() => undefined) : text;
        } catch {
          return undefined;
        }
      };
      // Re-seals one stored value of row `id` with `write`, unless it is already current.
      const resealWith =
        (write: (id: string, previous: string, sealed: string) => MaybePromise<number>) =>
        (id: string, stored: string): MaybePromise<unknown> => {
          if (sealedKeyId(stored) === encryption.current) {
            result.current++;
            return undefined;
          }
          return then(opened(id, stored), (text) => {
            if (text === undefined) {
              result.unreadable.push(id);
              return undefined;
            }
            return then(this.#sealing.seal(id, text), (sealed) =>
              then(write(id, stored, sealed), (changed) => {
                result.resealed += changed;
              }),
            );
          });
        };
      const answers = answerScan(
        statements,
        batchSize,
        resealWith((id, previous, sealed) => statements.reseal(id, previous, sealed)),
      );
      // The recorded steps are sealed like the answers, so a retired key must leave them too.
      const steps = stepScan(
        statements,
        batchSize,
        resealWith((id, previous, sealed) => statements.resealSteps(id, previous, sealed)),
      );
      const scan = () => then(repeat(answers), () => repeat(steps));
      return then(scan(), () => ({
        ...result,
        // A row whose answer and step record both failed to open is named once.
        unreadable: [...new Set(result.unreadable)].sort(compareKeys),
      }));
    });
  }

  /**
   * How the stored answers are kept, scanned in batches of `batchSize`: how many are plain JSON,
   * how many are sealed under each key id, and which of those ids the keyring lacks. What
   * `idem doctor` reports; `idem rekey` fixes what is not under the current key.
   */
  sealingReport(options: RekeyOptions = {}): ModeResult<M, SealingReport> {
    return this.#run(() => {
      const batchSize = options.batchSize ?? DEFAULT_ERASE_BATCH;
      assertIntegerOption(batchSize, 'batchSize', 1, MAX_BATCH_SIZE);
      const statements = this.#open();
      const encryption = this.#sealing.encryption;
      const report = { plaintext: 0, byKey: {} as Record<string, number> };
      const scan = answerScan(statements, batchSize, (_id, stored) => {
        const keyId = sealedKeyId(stored);
        if (keyId === undefined) report.plaintext++;
        else report.byKey[keyId] = (report.byKey[keyId] ?? 0) + 1;
      });
      return then(repeat(scan), () => {
        const ids = Object.keys(report.byKey).sort();
        return {
          plaintext: report.plaintext,
          byKey: report.byKey,
          current: encryption?.current ?? null,
          retired: ids.filter((id) => encryption?.has(id) === true && id !== encryption.current),
          missing: ids.filter((id) => encryption?.has(id) !== true),
        };
      });
    });
  }

  /** {@inheritDoc IdempotencyStore.counts} */
  counts(): ModeResult<M, StatusCounts> {
    return this.#run(() => then(this.#open().counts(), countByStatus));
  }

  /** {@inheritDoc IdempotencyStore.sweepBatch} */
  sweepBatch(now: number, batchSize: number): ModeResult<M, number> {
    return this.#run(() => {
      assertIntegerOption(batchSize, 'batchSize', 1, MAX_BATCH_SIZE);
      assertTime(now, 'now');
      return this.#open().sweepBatch(now, batchSize);
    });
  }

  /** {@inheritDoc LeasedIdempotencyStore.stats} */
  stats(now: number): ModeResult<M, LeaseStats> {
    return this.#run(() => {
      assertTime(now, 'now');
      return then(this.#open().stats(now), (rows) => {
        const past = countByStatus(rows.map((row) => ({ status: row.status, count: row.past })));
        const pending = rows.find((row) => row.status === KeyStatus.pending);
        return {
          ...countByStatus(rows),
          expired: past.done,
          stalePending: past.pending,
          lapsed: Number(pending?.lapsed ?? 0),
          unrecorded: Number(pending?.unrecorded ?? 0),
        };
      });
    });
  }

  /** {@inheritDoc LeasedIdempotencyStore.release} */
  release(key: string, fingerprint: string, attempt?: number): ModeResult<M, boolean> {
    return this.#run(() => {
      this.#checkKey(key);
      this.#checkFingerprint(fingerprint);
      if (attempt !== undefined) assertFencingToken(attempt);
      const statements = this.#open();
      const changed =
        attempt === undefined
          ? statements.release(key, fingerprint)
          : statements.releaseFenced(key, fingerprint, attempt);
      return then(changed, isOne);
    });
  }

  /** {@inheritDoc IdempotencyStore.get} */
  get(key: string): ModeResult<M, IdempotencyRecord<T> | null> {
    return this.#run(() => {
      this.#checkKey(key);
      return then(this.#open().get(key), (row) =>
        then(this.#openRow(row), (opened) => (opened === undefined ? null : toRecord<T>(opened))),
      );
    });
  }

  /**
   * {@inheritDoc IdempotencyStore.close}
   *
   * Refuses every operation called after it at once, waits until every operation called before
   * it has settled, then closes the connection (the dialect's `close`). A second call waits for
   * the first.
   */
  close(): ModeResult<M, void> {
    return this.#runner(() => {
      if (!this.#closed) {
        this.#closed = true;
        const running = [...this.#inFlight];
        this.#closing =
          running.length === 0
            ? this.#statements.close?.()
            : Promise.all(running).then(() => this.#statements.close?.());
      }
      return then(this.#closing, noop);
    });
  }
}
