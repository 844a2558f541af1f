import { IdempotencyError } from '../core/errors.js';
import { serializeResponse } from '../core/json.js';
import type { IdempotencyStore, LeasedIdempotencyStore } from '../core/store.js';
import { isThenable } from '../core/thenable.js';
import type { TransactionRunner } from '../function/transaction.js';
import { type Heartbeat, heartbeat } from './heartbeat.js';
import type { ResolvedOptions } from './options.js';
import { type IdempotentResult, Outcome, problemResult } from './outcome.js';
import { AnswerNotRecordedError, RequestSupersededError } from './problems.js';
import { type Report, reported } from './report.js';
import { type HttpResponse, toStoredAnswer, toWire, type WireResponse } from './response.js';

/**
 * A request this layer let through to the handler. Exactly one of `complete` or `fail` must be
 * called once the handler is done.
 */
export interface Execution {
  /**
   * Records the handler's answer: stores it (and returns `executed`) if its status is stored,
   * otherwise releases the key (`notStored`), since the handler failed. If a stored status cannot
   * be recorded (the store refuses or fails), the key is **not** released: the handler's effect
   * happened, and a released key would let a retry run it again. It stays `pending` (retries get
   * 409; on a store with leases it is marked unrecorded, so no retry takes it over) and the result
   * is an {@link AnswerNotRecordedError} problem carrying the answer: alert on it, have someone
   * check the effect, then release the key. If the request's lease lapsed and a retry took the key
   * over, its answer is refused: the result is a {@link RequestSupersededError} problem (the
   * `superseded` outcome). Never throws for a store failure.
   */
  complete(response: HttpResponse): Promise<IdempotentResult>;
  /**
   * The handler threw: releases the key this request reserved (its key, fingerprint and fencing
   * token checked), so a retry runs. Throws an `AggregateError` of `error` and the store's error if
   * that fails.
   */
  fail(error: unknown): Promise<void>;
  /**
   * The transactional form, instead of `complete`/`fail`: runs `handler(tx)` in one transaction of
   * `runner` that also records its answer, fenced by the attempt token, and commits before this
   * returns. A stored status commits the handler's writes with the answer (`executed`); a status
   * that is not stored, or a throw, rolls the writes back and releases the key (`notStored`, or the
   * error rethrown after release); a takeover meanwhile rolls everything back (`superseded`). A
   * transaction that fails on its own (its begin, the recording or the commit: the database's
   * error, not the handler's) releases the key and answers an {@link AnswerNotRecordedError}
   * problem with that error as its `cause`: never rethrown, so the driver's text (a statement and
   * its parameters) cannot reach the client through an error handler.
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

/** Whether the store offers fenced leases (every store of this package does). */
export function isLeased(
  store: IdempotencyStore<unknown>,
): store is LeasedIdempotencyStore<unknown> {
  const candidate = store as Partial<LeasedIdempotencyStore<unknown>>;
  return typeof candidate.acquire === 'function' && typeof candidate.renew === 'function';
}

/** What a request owns: its key and fingerprint, and its fencing token on a leased store. */
export interface Ownership {
  readonly store: IdempotencyStore<unknown>;
  readonly id: string;
  readonly fingerprint: string;
  /** The fencing token from `acquire`; `undefined` on a store without leases (`reserve`). */
  readonly attempt: number | undefined;
}

/**
 * The {@link Execution} of a request that owns its key. On a leased store it renews the lease in
 * the background until the handler is done, and every write it makes carries the fencing token.
 */
export function owned(ownership: Ownership, settings: ResolvedOptions, report: Report): Execution {
  const { store, id, fingerprint, attempt } = ownership;
  const leased = attempt !== undefined && isLeased(store) ? store : undefined;
  const beat: Heartbeat | undefined =
    leased && attempt !== undefined
      ? heartbeat(leased, settings, id, fingerprint, attempt)
      : undefined;

  async function release(): Promise<void> {
    // Deletes only the pending row with this fingerprint (and token): never another request's.
    if (leased) await leased.release(id, fingerprint, attempt);
    else await store.release(id, fingerprint);
  }

  // The handler ran but its answer is not recorded: the row is marked so no retry takes it over
  // (that would run the effect again) and an operator sees it. If even that fails, the lease
  // lapses and the next retry runs the handler once more: the trade-off of a lease.
  async function keepForOperator(): Promise<void> {
    if (!leased || attempt === undefined) return;
    try {
      await leased.markUnrecorded(id, fingerprint, attempt);
    } catch {
      // See above.
    }
  }

  // Whether a retry took the key over while the handler ran: the row has a newer token.
  async function superseded(): Promise<boolean> {
    if (!leased) return false;
    try {
      const row = await leased.get(id);
      return row !== null && row.fingerprint === fingerprint && row.attempt !== attempt;
    } catch {
      return false;
    }
  }

  async function notStored(response: WireResponse): Promise<IdempotentResult> {
    try {
      await release();
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

  async function notRecorded(
    reason: string,
    response: WireResponse,
    cause?: unknown,
  ): Promise<IdempotentResult> {
    await keepForOperator();
    return problemResult(new AnswerNotRecordedError(reason, response, cause));
  }

  async function record(response: WireResponse): Promise<IdempotentResult> {
    const { status } = response;
    if (!Number.isInteger(status) || status < 200 || status > 599) {
      return notRecorded(
        `the handler answered status ${String(status)}, which is not an HTTP status from 200 to 599; the key stays pending`,
        response,
      );
    }
    const stored = toStoredAnswer(response, settings.storedHeaders, settings.maxStoredBytes);
    let finished: boolean;
    try {
      finished = leased
        ? await leased.finish(id, fingerprint, stored, attempt)
        : await store.finish(id, fingerprint, stored);
    } catch (error) {
      const reason = error instanceof Error ? error.message : String(error);
      return notRecorded(
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

  async function fail(error: unknown): Promise<void> {
    beat?.stop();
    try {
      await release();
    } catch (releaseError) {
      throw new AggregateError(
        [error, releaseError],
        'the handler failed and releasing its idempotency key failed too',
      );
    } finally {
      report({ outcome: Outcome.failed, status: undefined, error });
    }
  }

  return {
    async transact(runner, handler) {
      let sent: WireResponse = toWire({ status: 500 });
      // Whether the run ended with the handler's own error, which is the app's to answer.
      let handlerThrew = false;
      const threw = (error: unknown): never => {
        handlerThrew = true;
        throw error;
      };
      // Synchronous while the handler is: a better-sqlite3 transaction cannot span an await.
      const ownHandler = (tx: Parameters<typeof handler>[0]) => {
        try {
          const answer = handler(tx);
          return isThenable(answer) ? Promise.resolve(answer).catch(threw) : answer;
        } catch (error) {
          return threw(error);
        }
      };
      let outcome: Awaited<ReturnType<typeof runner.run<HttpResponse>>>;
      try {
        outcome = await runner.run(
          { key: id, digest: fingerprint, ...(attempt === undefined ? {} : { attempt }) },
          ownHandler,
          (answer) => {
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
          },
        );
      } catch (error) {
        beat?.stop();
        // Rolled back: nothing of the handler's was committed, so the key is released and a retry runs.
        if (error instanceof NotStoredAnswer)
          return reported(report, await notStored(error.response));
        if (error instanceof AnswerNotRecordedError) {
          const released = await notStored(sent);
          return reported(report, released.outcome === 'problem' ? released : problemResult(error));
        }
        if (!handlerThrew && !(error instanceof IdempotencyError)) {
          // The database failed the transaction itself. Its error says which statement, with which
          // parameters (the key, the fingerprint, the answer): for logs, through `cause`, only.
          const problem = new AnswerNotRecordedError(
            `the transaction did not commit, so the key is released: ${error instanceof Error ? error.message : String(error)}`,
            sent,
            error,
          );
          const released = await notStored(sent);
          return reported(
            report,
            released.outcome === 'problem' ? released : problemResult(problem),
          );
        }
        await fail(error);
        throw error;
      }
      beat?.stop();
      if (!outcome.committed) {
        // The row was taken over (or released by hand) while the handler ran: rolled back whole.
        return reported(
          report,
          problemResult(new RequestSupersededError(sent)),
          Outcome.superseded,
        );
      }
      return reported(report, { outcome: Outcome.executed, response: sent });
    },
    async complete(answer) {
      beat?.stop();
      // One form from here on: the bytes that are sent are the bytes that are stored and replayed.
      const response = toWire(answer);
      // A status that is not stored means the handler failed: its effect did not complete, so the
      // key is released and a retry runs. Otherwise the handler succeeded and its effect happened:
      // an answer that cannot be recorded leaves the key pending, since releasing it would let a
      // retry run the effect a second time.
      const result = settings.shouldStore(response.status)
        ? await record(response)
        : await notStored(response);
      if (result.outcome === 'problem' && (await superseded())) {
        return reported(
          report,
          problemResult(new RequestSupersededError(response)),
          Outcome.superseded,
        );
      }
      return reported(report, result);
    },
    fail,
  };
}
