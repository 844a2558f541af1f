import { setTimeout as sleep } from 'node:timers/promises';
import { KeyStatus } from '../core/status.js';
import type { IdempotencyRecord, IdempotencyStore } from '../core/store.js';
import { IDEMPOTENCY_KEY_HEADER, parseIdempotencyKey } from './key.js';
import { type IdempotentOptions, type ResolvedOptions, resolveOptions } from './options.js';
import { type IdempotentResult, Outcome, type OutcomeEvent, problemResult } from './outcome.js';
import {
  AnswerExpiredError,
  AnswerNotRecordedError,
  AnswerTooLargeError,
  BodyRefusedError,
  KeyMalformedError,
  KeyMissingError,
  KeyReusedError,
  RequestInProgressError,
} from './problems.js';
import { headerValue, type IdempotentRequest } from './request.js';
import {
  fromStoredAnswer,
  type HttpResponse,
  omittedSize,
  toStoredAnswer,
  toWire,
  type WireResponse,
} from './response.js';
import { storedId } from './scope.js';

/** The header that marks a replayed answer. */
export const REPLAYED_HEADER = 'idempotent-replayed';

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
   * 409) and the result is an {@link AnswerNotRecordedError} problem carrying the answer: alert on
   * it, have someone check the effect, then release the key. Never throws for a store failure.
   */
  complete(response: HttpResponse): Promise<IdempotentResult>;
  /**
   * The handler threw: releases the key this request reserved (its key and fingerprint checked),
   * so a retry runs. Throws an `AggregateError` of `error` and the store's error if that fails.
   */
  fail(error: unknown): Promise<void>;
}

/**
 * What {@link IdempotentExecutor.begin} decided: answer now, run the handler under an
 * {@link Execution}, or let the request pass untouched (no key where none is required, or a method
 * the layer does not cover), in which case nothing is captured or stored.
 */
export type Decision =
  | { readonly action: 'respond'; readonly result: IdempotentResult }
  | { readonly action: 'run'; readonly execution: Execution }
  | { readonly action: 'pass' };

/** The idempotency layer over one store. */
export interface IdempotentExecutor {
  /**
   * Decides what to do with a request without running anything: answer now (replay, problem),
   * run the handler under an {@link Execution}, or pass. For adapters that cannot wrap the handler in a
   * function call. May throw what the store, the fingerprint or the scope throw.
   */
  begin(request: IdempotentRequest): Promise<Decision>;
  /**
   * Runs `handler` at most once per key within the retention period and returns the outcome with
   * the response to send. A handler that throws releases the key and the error is rethrown.
   */
  handle(
    request: IdempotentRequest,
    handler: () => HttpResponse | Promise<HttpResponse>,
  ): Promise<IdempotentResult>;
}

// How often a key that vanished between `reserve` and `get` (released or purged in between) is
// tried again before answering "in progress": it keeps changing hands, so someone else owns it.
const MAX_VANISHED = 3;

function replay(record: IdempotencyRecord<unknown>): IdempotentResult {
  const omitted = omittedSize(record.response);
  if (omitted !== undefined) return problemResult(new AnswerTooLargeError(omitted));
  const response = fromStoredAnswer(record.key, record.response);
  return {
    outcome: Outcome.replayed,
    response: { ...response, headers: { ...response.headers, [REPLAYED_HEADER]: 'true' } },
  };
}

/** Tells the `onOutcome` hook, if any; what it throws never reaches the request. */
type Report = (result: Pick<OutcomeEvent, 'outcome' | 'status' | 'problem' | 'error'>) => void;

function reporter(
  settings: ResolvedOptions,
  request: IdempotentRequest,
  key: string | undefined,
  started: number,
): Report {
  return (result) => {
    const hook = settings.onOutcome;
    if (hook === undefined) return;
    try {
      hook({
        ...result,
        method: request.method,
        path: request.path,
        key,
        durationMs: performance.now() - started,
      });
    } catch {
      // A broken hook (logging, metrics) must never change what the client gets.
    }
  };
}

function reported(report: Report, result: IdempotentResult): IdempotentResult {
  report({
    outcome: result.outcome,
    status: result.response.status,
    ...(result.outcome === 'problem' ? { problem: result.problem } : {}),
  });
  return result;
}

function owned(
  store: IdempotencyStore<unknown>,
  settings: ResolvedOptions,
  id: string,
  fingerprint: string,
  report: Report,
): Execution {
  async function release(): Promise<void> {
    // Deletes only the pending row with this fingerprint: never another request's row or answer.
    await store.release(id, fingerprint);
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

  async function record(response: WireResponse): Promise<IdempotentResult> {
    const { status } = response;
    if (!Number.isInteger(status) || status < 200 || status > 599) {
      return problemResult(
        new AnswerNotRecordedError(
          `the handler answered status ${String(status)}, which is not an HTTP status from 200 to 599; the key stays pending`,
          response,
        ),
      );
    }
    let finished: boolean;
    try {
      finished = await store.finish(
        id,
        fingerprint,
        toStoredAnswer(response, settings.storedHeaders, settings.maxStoredBytes),
      );
    } catch (error) {
      const reason = error instanceof Error ? error.message : String(error);
      return problemResult(
        new AnswerNotRecordedError(
          `recording the answer failed, the key stays pending: ${reason}`,
          response,
          error,
        ),
      );
    }
    if (!finished) {
      // Our pending row is gone or changed hands: someone released it. Nothing is ours to release.
      return problemResult(
        new AnswerNotRecordedError(
          'finish found no pending row of this request: it was released or replaced while the handler ran',
          response,
        ),
      );
    }
    return { outcome: Outcome.executed, response };
  }

  return {
    async complete(answer) {
      // One form from here on: the bytes that are sent are the bytes that are stored and replayed.
      const response = toWire(answer);
      // A status that is not stored means the handler failed: its effect did not complete, so the
      // key is released and a retry runs. Otherwise the handler succeeded and its effect happened:
      // an answer that cannot be recorded leaves the key pending, since releasing it would let a
      // retry run the effect a second time.
      const result = settings.shouldStore(response.status)
        ? await record(response)
        : await notStored(response);
      return reported(report, result);
    },
    async fail(error) {
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
    },
  };
}

/**
 * The idempotency layer: runs a handler at most once per key within the retention period, and
 * answers every other request with that key from the store.
 *
 * ```
 *  request ─ key? ── none ──▶ 400 key-missing (or pass through if not required)
 *             │ malformed ──▶ 400 key-malformed
 *             ▼
 *  reserve(id, fingerprint, now + ttl) ── won ──▶ run handler ─┬─ stored status ─▶ finish ─▶ executed
 *             │ lost                                           │      finish fails ─▶ keep pending, 500
 *             │                                                ├─ other status ──▶ release ─▶ notStored
 *             ▼                                                └─ throws ────────▶ release, rethrow
 *  get(id) ─┬─ other fingerprint ─────────▶ 422 key-reused
 *           ├─ done, expires > now ───────▶ replay (Idempotent-Replayed: true)
 *           ├─ done, expires <= now ──────▶ 409 answer-expired (not replayed, not run)
 *           ├─ pending ───────────────────▶ 409 request-in-progress + Retry-After (or wait, poll)
 *           └─ gone (released meanwhile) ─▶ reserve again
 * ```
 *
 * Only the request that reserved a key ever releases it, and only while it is `pending` with its
 * fingerprint, so a failure never deletes another request's row or a stored answer. It releases
 * it only when the handler failed (threw, or answered a status that is not stored): then the
 * effect did not complete and a retry must be able to run. When the handler succeeded but its
 * answer could not be recorded (`finish` failed), the key stays `pending`, so retries get 409
 * rather than a second execution; the request gets 500 `answer-not-recorded` (an
 * {@link AnswerNotRecordedError} carrying the handler's answer). Alert on it: someone checks the
 * effect, then releases the key (`store.release(id, record.fingerprint)`).
 *
 * @param store - any {@link IdempotencyStore}; its answers are stored as {@link HttpResponse}s
 * @param options - see {@link IdempotentOptions}
 * @example
 * ```ts
 * const layer = idempotent(openSqliteStore('./idempotency.db'), { ttlSeconds: 72 * 3600 });
 * const result = await layer.handle(
 *   { method: 'POST', path: '/payments', headers, body },
 *   async () => ({ status: 201, body: await createPayment(body) }),
 * );
 * send(result.response);
 * ```
 * @throws {@link InvalidOptionError} for a bad option, when called
 */
export function idempotent(
  store: IdempotencyStore<unknown>,
  options: IdempotentOptions = {},
): IdempotentExecutor {
  const settings = resolveOptions(options);

  async function decide(request: IdempotentRequest, started: number): Promise<Decision> {
    const respond = (report: Report, result: IdempotentResult): Decision => ({
      action: 'respond',
      result: reported(report, result),
    });
    const unkeyed = reporter(settings, request, undefined, started);
    if (!settings.methods.has(request.method.toUpperCase())) {
      unkeyed({ outcome: Outcome.passedThrough, status: undefined });
      return { action: 'pass' };
    }
    const header = headerValue(request.headers, IDEMPOTENCY_KEY_HEADER);
    if (header === undefined) {
      if (settings.required) return respond(unkeyed, problemResult(new KeyMissingError()));
      unkeyed({ outcome: Outcome.passedThrough, status: undefined });
      return { action: 'pass' };
    }
    const parsed = parseIdempotencyKey(header);
    if (!parsed.ok) return respond(unkeyed, problemResult(new KeyMalformedError(parsed.reason)));
    const id = storedId(request.scope, parsed.key);
    const report = reporter(settings, request, id, started);
    let fingerprint: string;
    try {
      fingerprint = await settings.fingerprint(request);
    } catch (error) {
      if (error instanceof BodyRefusedError) return respond(report, problemResult(error));
      throw error;
    }
    const deadline = performance.now() + settings.waitTimeoutMs;
    let vanished = 0;
    for (;;) {
      const now = settings.now();
      if (await store.reserve(id, fingerprint, now + settings.ttlSeconds)) {
        return { action: 'run', execution: owned(store, settings, id, fingerprint, report) };
      }
      const record = await store.get(id);
      if (record === null) {
        vanished += 1;
        if (vanished < MAX_VANISHED) continue;
      } else if (record.fingerprint !== fingerprint) {
        return respond(report, problemResult(new KeyReusedError(record)));
      } else if (record.status === KeyStatus.done) {
        return respond(
          report,
          record.expires > now ? replay(record) : problemResult(new AnswerExpiredError(record)),
        );
      }
      // Pending, or a key that keeps changing hands: someone else is working on it.
      if (performance.now() + settings.waitIntervalMs > deadline) {
        return respond(
          report,
          problemResult(new RequestInProgressError(settings.retryAfterSeconds, record)),
        );
      }
      await sleep(settings.waitIntervalMs);
    }
  }

  function begin(request: IdempotentRequest): Promise<Decision> {
    return decide(request, performance.now());
  }

  return {
    begin,
    async handle(request, handler) {
      const decision = await begin(request);
      if (decision.action === 'respond') return decision.result;
      if (decision.action === 'pass') {
        return { outcome: Outcome.passedThrough, response: toWire(await handler()) };
      }
      let response: HttpResponse;
      try {
        response = await handler();
      } catch (error) {
        await decision.execution.fail(error);
        throw error;
      }
      return decision.execution.complete(response);
    },
  };
}
