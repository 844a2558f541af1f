import { IdempotencyError, OutcomeUnknownError } from '../core/errors.js';
import { serializeResponse } from '../core/json.js';
import type { Ownership } from '../core/ownership.js';
import { TransactionRolledBackError } from '../core/rolled-back.js';
import type { Step, StepSession } from '../core/steps.js';
import { isThenable } from '../core/thenable.js';
import type { TransactionOutcome, TransactionRunner } from '../core/transaction-runner.js';
import { type AnswerStream, teeAnswer } from './answer-stream.js';
import type { ResolvedOptions } from './options.js';
import { type IdempotentResult, Outcome, problemResult } from './outcome.js';
import {
  AnswerNotRecordedError,
  type IdempotencyProblem,
  RequestRolledBackError,
  RequestSupersededError,
} from './problems.js';
import { type Report, reported } from './report.js';
import {
  type HttpResponse,
  type NotKept,
  toStoredAnswer,
  toWire,
  type WireResponse,
} from './response.js';

/**
 * A request this layer let through to the handler. Exactly one of `complete` or `fail` must be
 * called once the handler is done.
 */
export interface Execution {
  /**
   * The step function of the handler, with the layer's `steps` option; `undefined` without it.
   * Adapters hand it to the handler through `idempotencyStep(request)`.
   */
  readonly step: Step<unknown> | undefined;
  /**
   * Records the handler's answer: stores it (and returns `executed`) if its status is stored,
   * otherwise releases the key (`notStored`), since the handler failed (a key holding a recorded
   * step has its lease ended instead, keeping the steps for the next request). If a stored status
   * cannot be recorded (the store refuses or fails), the key is **not** released: the handler's
   * effect happened, and a released key would let a retry run it again. It stays `pending` (retries
   * get 409; it is marked unrecorded, so no retry takes it over) and the result
   * is an {@link AnswerNotRecordedError} problem carrying the answer: alert on it, have someone
   * check the effect, then release the key. If the request's lease lapsed and a retry took the key
   * over, its answer is refused: the result is a {@link RequestSupersededError} problem (the
   * `superseded` outcome). Never throws for a store failure.
   */
  complete(response: HttpResponse): Promise<IdempotentResult>;
  /**
   * Instead of `complete`/`fail`, for an answer the handler streams: its status and headers are
   * out, and its body is teed as it is sent (see {@link AnswerStream}). Once it ends it is recorded
   * as `complete` records an answer, with its bytes when they fit `maxStoredBytes` (and
   * `storeStreams` is on). A stored status whose stream cannot be kept (past the cap, its first
   * byte under `storeStreams: false`, still open after `streamRecordAfterSeconds`) is recorded
   * then, before its end, with only the size sent so far: the lease is no longer renewed, and a
   * retry gets 410 `answer-not-kept` and is never run again.
   */
  stream(head: Omit<WireResponse, 'body'>): AnswerStream;
  /**
   * The handler threw: releases the key this request reserved (its key, fingerprint and fencing
   * token checked), so a retry runs; an `OutcomeUnknownError` marks it unrecorded instead, so
   * retries get 409 `outcome-unknown` until an operator settles it. A key holding a recorded step
   * is not released but its lease ended, so the next request goes on from the steps. Throws an
   * `AggregateError` of `error` and the store's error if that fails.
   */
  fail(error: unknown): Promise<void>;
  /**
   * The transactional form, instead of `complete`/`fail`: runs `handler(tx)` in one transaction of
   * `runner` that also records its answer, fenced by the fencing token, and commits before this
   * returns. A stored status commits the handler's writes with the answer (`executed`); a status
   * that is not stored, or a throw, rolls the writes back and releases the key (`notStored`, or the
   * error rethrown after release); a takeover meanwhile rolls everything back (`superseded`). A
   * transaction that fails on its own (its begin, the recording or the commit: the database's
   * error, not the handler's) releases the key and answers an {@link AnswerNotRecordedError}
   * problem with that error as its `cause`: never rethrown, so the driver's text (a statement and
   * its parameters) cannot reach the client through an error handler. A transaction the database
   * rolled back on its own (a serialization failure, a deadlock) on every attempt of the runner
   * releases the key too, and answers a {@link RequestRolledBackError} problem (503, may be
   * retried).
   */
  transact<TX>(
    runner: TransactionRunner<TX>,
    handler: (tx: TX) => HttpResponse | Promise<HttpResponse>,
  ): Promise<IdempotentResult>;
}

// Thrown from inside the transaction to roll back an answer whose status is not stored.
class NotStoredAnswer extends Error {
  constructor(readonly response: WireResponse) {
    super('the answer is not stored');
  }
}

// One class for every execution: its methods are shared, so a request that runs its handler
// builds one object, not a closure per step.
class OwnedExecution implements Execution {
  readonly #ownership: Ownership;
  readonly #settings: ResolvedOptions;
  readonly #report: Report;
  readonly #steps: StepSession<unknown> | undefined;

  constructor(
    ownership: Ownership,
    settings: ResolvedOptions,
    report: Report,
    steps: StepSession<unknown> | undefined,
  ) {
    this.#ownership = ownership;
    this.#settings = settings;
    this.#report = report;
    this.#steps = steps;
  }

  get step(): Step<unknown> | undefined {
    return this.#steps?.step;
  }

  // Steps were recorded, some of them effects outside the database: deleting the key would lose
  // them, so a handler that failed ends its lease instead, and the next request goes on from them.
  #keepsSteps(): boolean {
    return this.#steps?.hasRecorded() ?? false;
  }

  // The handler ran but its answer is not recorded: the row is marked so no retry takes it over
  // (that would run the effect again) and an operator sees it. If even that fails, the lease
  // lapses and the next retry runs the handler once more: the trade-off of a lease.
  async #keepForOperator(): Promise<void> {
    try {
      await this.#ownership.markUnrecorded();
    } catch {
      // See above.
    }
  }

  async #notStored(response: WireResponse): Promise<IdempotentResult> {
    try {
      if (this.#keepsSteps()) await this.#ownership.lapse();
      else await this.#ownership.release();
    } catch (error) {
      return problemResult(
        new AnswerNotRecordedError(
          'releasing the key of an answer not stored failed',
          response,
          error,
        ),
      );
    }
    return { outcome: Outcome.notStored, response };
  }

  async #notRecorded(
    reason: string,
    response: WireResponse,
    cause?: unknown,
  ): Promise<IdempotentResult> {
    await this.#keepForOperator();
    return problemResult(new AnswerNotRecordedError(reason, response, cause));
  }

  async #record(response: WireResponse, notKept?: NotKept): Promise<IdempotentResult> {
    const { status } = response;
    if (!Number.isInteger(status) || status < 200 || status > 599) {
      return this.#notRecorded(
        `the handler answered status ${String(status)}, which is not an HTTP status from 200 to 599; the key stays pending`,
        response,
      );
    }
    const settings = this.#settings;
    const stored = toStoredAnswer(
      response,
      settings.storedHeaders,
      settings.maxStoredBytes,
      notKept,
    );
    let finished: boolean;
    try {
      finished = await this.#ownership.finish(stored);
    } catch (error) {
      const reason = error instanceof Error ? error.message : String(error);
      return this.#notRecorded(
        `recording the answer failed, the key stays pending: ${reason}`,
        response,
        error,
      );
    }
    if (!finished) {
      // Our pending row is gone or changed hands: nothing is ours to release or mark.
      return problemResult(
        new AnswerNotRecordedError(
          'finish found no pending row of this request: it was released or replaced while the handler ran',
          response,
        ),
      );
    }
    return { outcome: Outcome.executed, response };
  }

  // A transaction that rolled back: the key is released and `problem` answered, or, when releasing
  // fails, the problem of that failure.
  async #releasedWith(problem: IdempotencyProblem, sent: WireResponse): Promise<IdempotentResult> {
    const released = await this.#notStored(sent);
    return reported(
      this.#report,
      released.outcome === 'problem' ? released : problemResult(problem),
    );
  }

  async fail(error: unknown): Promise<void> {
    try {
      // An outcome the handler could not settle is held for an operator, steps or not.
      if (this.#keepsSteps() && !(error instanceof OutcomeUnknownError)) await this.#lapse(error);
      else {
        await this.#ownership.abandon(
          error,
          'the handler failed and releasing its idempotency key failed too',
        );
      }
    } finally {
      const outcome =
        error instanceof OutcomeUnknownError ? Outcome.outcomeUnknown : Outcome.failed;
      this.#report({ outcome, status: undefined, error });
    }
  }

  async #lapse(error: unknown): Promise<void> {
    try {
      await this.#ownership.lapse();
    } catch (lapseError) {
      throw new AggregateError(
        [error, lapseError],
        'the handler failed and ending the lease of its idempotency key failed too',
      );
    }
  }

  async transact<TX>(
    runner: TransactionRunner<TX>,
    handler: (tx: TX) => HttpResponse | Promise<HttpResponse>,
  ): Promise<IdempotentResult> {
    const ownership = this.#ownership;
    const settings = this.#settings;
    const report = this.#report;
    let sent: WireResponse = toWire({ status: 500 });
    // Whether the run ended with the handler's own error, which is the app's to answer.
    let handlerThrew = false;
    const threw = (error: unknown): never => {
      handlerThrew = true;
      throw error;
    };
    // Synchronous while the handler is: a better-sqlite3 transaction cannot span an await.
    const ownHandler = (tx: Parameters<typeof handler>[0]) => {
      // A runner runs the handler again after the database rolled an attempt back.
      handlerThrew = false;
      try {
        const answer = handler(tx);
        return isThenable(answer) ? Promise.resolve(answer).catch(threw) : answer;
      } catch (error) {
        return threw(error);
      }
    };
    let outcome: TransactionOutcome<HttpResponse>;
    try {
      outcome = await ownership.transact(runner, ownHandler, (answer) => {
        // Decided inside the transaction: an answer that is not stored takes the writes with it.
        sent = toWire(answer);
        const { status } = sent;
        if (!Number.isInteger(status) || status < 200 || status > 599) {
          throw new AnswerNotRecordedError(
            `the handler answered status ${String(status)}, which is not an HTTP status from 200 to 599; its writes were rolled back and the key released`,
            sent,
          );
        }
        if (!settings.shouldStore(status)) throw new NotStoredAnswer(sent);
        return serializeResponse(
          toStoredAnswer(sent, settings.storedHeaders, settings.maxStoredBytes),
        );
      });
    } catch (error) {
      // Rolled back: nothing of the handler's was committed, so the key is released and a retry
      // runs.
      if (error instanceof NotStoredAnswer)
        return reported(report, await this.#notStored(error.response));
      if (error instanceof AnswerNotRecordedError) return this.#releasedWith(error, sent);
      // Whatever statement failed, the database undid the whole transaction: the client may retry.
      if (error instanceof TransactionRolledBackError) {
        return this.#releasedWith(new RequestRolledBackError(error), sent);
      }
      if (!handlerThrew && !(error instanceof IdempotencyError)) {
        // The database failed the transaction itself. Its error says which statement, with which
        // parameters (the key, the fingerprint, the answer): for logs, through `cause`, only.
        const problem = new AnswerNotRecordedError(
          `the transaction did not commit, so the key is released: ${error instanceof Error ? error.message : String(error)}`,
          sent,
          error,
        );
        return this.#releasedWith(problem, sent);
      }
      await this.fail(error);
      throw error;
    }
    if (!outcome.committed) {
      // The row was taken over (or released by hand) while the handler ran: rolled back whole.
      return reported(report, problemResult(new RequestSupersededError(sent)), Outcome.superseded);
    }
    return reported(report, { outcome: Outcome.executed, response: sent });
  }

  stream(head: Omit<WireResponse, 'body'>): AnswerStream {
    const ending = {
      complete: (response: WireResponse, notKept?: NotKept) => this.#complete(response, notKept),
      fail: (error: unknown) => this.fail(error),
    };
    return teeAnswer(head, ending, this.#settings, this.#storesStatus(head.status));
  }

  // Whether an answer with this status is stored; a `shouldStore` of the app's that throws counts
  // as no here, inside an adapter's write, and its error reaches the app at the stream's end.
  #storesStatus(status: number): boolean {
    try {
      return this.#settings.shouldStore(status);
    } catch {
      return false;
    }
  }

  complete(answer: HttpResponse): Promise<IdempotentResult> {
    // One form from here on: the bytes that are sent are the bytes that are stored and replayed.
    return this.#complete(toWire(answer));
  }

  async #complete(response: WireResponse, notKept?: NotKept): Promise<IdempotentResult> {
    const ownership = this.#ownership;
    const report = this.#report;
    ownership.stop();
    // A status that is not stored means the handler failed: its effect did not complete, so the
    // key is released and a retry runs. Otherwise the handler succeeded and its effect happened:
    // an answer that cannot be recorded leaves the key pending, since releasing it would let a
    // retry run the effect a second time.
    const result = this.#settings.shouldStore(response.status)
      ? await this.#record(response, notKept)
      : await this.#notStored(response);
    if (result.outcome === 'problem' && (await ownership.superseded())) {
      return reported(
        report,
        problemResult(new RequestSupersededError(response)),
        Outcome.superseded,
      );
    }
    return reported(report, result);
  }
}

/**
 * The {@link Execution} of a request that owns its key: the HTTP mapping of its {@link Ownership}'s
 * outcomes to results and problems.
 */
export function owned(
  ownership: Ownership,
  settings: ResolvedOptions,
  report: Report,
  steps?: StepSession<unknown>,
): Execution {
  return new OwnedExecution(ownership, settings, report, steps);
}
