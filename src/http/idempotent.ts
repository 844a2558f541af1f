import { type Claim, claim } from '../core/claim.js';
import {
  AnswerUnreadableError,
  EncryptionKeyMissingError,
  InvalidOptionError,
} from '../core/errors.js';
import type { Fingerprint } from '../core/member-digests.js';
import type { Ownership } from '../core/ownership.js';
import { type Step, type StepSession, startSteps } from '../core/steps.js';
import type { IdempotencyRecord, LeasedIdempotencyStore } from '../core/store.js';
import { isThenable } from '../core/thenable.js';
import { MAX_KEY_BYTES } from '../core/validation.js';
import { type Execution, owned } from './execution.js';
import { IDEMPOTENCY_KEY_HEADER, parseIdempotencyKey } from './key.js';
import { type IdempotentOptions, resolveOptions } from './options.js';
import { type IdempotentResult, Outcome, problemResult } from './outcome.js';
import {
  AnswerExpiredError,
  AnswerNotKeptError,
  BodyRefusedError,
  KeyMalformedError,
  KeyMissingError,
  KeyReusedError,
  OutcomeUnsettledError,
  RequestInProgressError,
  ScopeMalformedError,
  SealedAnswerError,
} from './problems.js';
import { type Report, reported, reporter } from './report.js';
import type { IdempotentRequest } from './request.js';
import { fromStoredAnswer, type HttpResponse, notKeptOf, toWire } from './response.js';
import { storedId } from './scope.js';

/** The header that marks a replayed answer. */
export const REPLAYED_HEADER = 'idempotent-replayed';

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
   * run the handler under an {@link Execution}, or pass. For adapters that cannot wrap the handler
   * in a function call. May throw what the store, the fingerprint or the scope throw.
   */
  begin(request: IdempotentRequest): Promise<Decision>;
  /**
   * Runs `handler` at most once per key within the retention period and returns the outcome with
   * the response to send. A handler that throws releases the key (or, after a recorded step, ends
   * its lease) and the error is rethrown. `handler` gets the step function with the `steps`
   * option, `undefined` without it or for a request passed through.
   */
  handle(
    request: IdempotentRequest,
    handler: (step: Step<unknown> | undefined) => HttpResponse | Promise<HttpResponse>,
  ): Promise<IdempotentResult>;
}

function respond(report: Report, result: IdempotentResult): Decision {
  return { action: 'respond', result: reported(report, result) };
}

function replay(record: IdempotencyRecord<unknown>): IdempotentResult {
  const notKept = notKeptOf(record.response);
  if (notKept !== undefined) {
    return problemResult(new AnswerNotKeptError(notKept.bytes, notKept.reason));
  }
  const response = fromStoredAnswer(record.key, record.response);
  return {
    outcome: Outcome.replayed,
    response: { ...response, headers: { ...response.headers, [REPLAYED_HEADER]: 'true' } },
  };
}

/**
 * The idempotency layer: runs a handler at most once per key within the retention period, and
 * answers every other request with that key from the store. The claim itself (and the wait for
 * another owner) is the core claim engine's, shared with `makeIdempotent`; this layer reads the
 * key from the request and maps the engine's outcomes to answers and problems.
 *
 * ```
 *  request ─ key? ── none ──▶ 400 key-missing (or pass through if not required)
 *             │ malformed ──▶ 400 key-malformed
 *             ▼
 *  claim(id, fingerprint) ─ acquired ──▶ run handler ─┬─ stored status ─▶ finish ─▶ executed
 *     │                                              │      finish fails ─▶ keep pending, 500
 *     │                                              ├─ other status ──▶ release ─▶ notStored
 *     │                                              ├─ throws OutcomeUnknownError ─▶ hold, rethrow
 *     │                                              └─ throws ────────▶ release, rethrow
 *     ├─ mismatch ───▶ 422 key-reused
 *     ├─ replay ─────▶ the stored answer (Idempotent-Replayed: true)
 *     ├─ expired ────▶ 409 answer-expired (not replayed, not run)
 *     ├─ unknown ────▶ 409 outcome-unknown (held unrecorded for an operator)
 *     └─ inProgress ─▶ 409 request-in-progress + Retry-After (after the wait, if any)
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
 * @param store - any {@link LeasedIdempotencyStore}; its answers are stored as
 * {@link HttpResponse}s
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
  store: LeasedIdempotencyStore<unknown>,
  options: IdempotentOptions = {},
): IdempotentExecutor {
  const settings = resolveOptions(options);
  if (settings.steps !== undefined && settings.steps.store !== store) {
    throw new InvalidOptionError("the `steps` log must be over the layer's store");
  }

  // The steps earlier owners recorded on the key, read before the handler runs. A failed read
  // ends the lease rather than releasing the key: releasing would delete the recorded steps.
  async function stepsOf(ownership: Ownership): Promise<StepSession<unknown> | undefined> {
    if (settings.steps === undefined) return undefined;
    try {
      return await startSteps(settings.steps, ownership, undefined);
    } catch (error) {
      await ownership.lapse().catch(() => undefined);
      throw error;
    }
  }

  async function decide(request: IdempotentRequest, started: number): Promise<Decision> {
    const unkeyed = reporter(settings, request, undefined, started);
    if (!settings.methods.has(request.method.toUpperCase())) {
      unkeyed({ outcome: Outcome.passedThrough, status: undefined });
      return { action: 'pass' };
    }
    const header = request.headers[IDEMPOTENCY_KEY_HEADER];
    if (header === undefined) {
      if (settings.required) return respond(unkeyed, problemResult(new KeyMissingError()));
      unkeyed({ outcome: Outcome.passedThrough, status: undefined });
      return { action: 'pass' };
    }
    // Header lines an adapter could count; those joined into one value are refused by the key's
    // grammar (a key has no comma).
    if (typeof header !== 'string' && header.length > 1) {
      const reason = `the header must be sent once, not ${header.length} times`;
      return respond(unkeyed, problemResult(new KeyMalformedError(reason)));
    }
    const parsed = parseIdempotencyKey(typeof header === 'string' ? header : (header[0] ?? ''));
    if (!parsed.ok) return respond(unkeyed, problemResult(new KeyMalformedError(parsed.reason)));
    const { scope } = request;
    // The scope comes from the request (a header, a token): an empty or broken one is the
    // client's to fix. Anything but a string or undefined is the scope function's bug.
    if (typeof scope === 'string' && (scope.length === 0 || !scope.isWellFormed())) {
      const reason = scope.length === 0 ? 'it is empty' : 'it holds a lone UTF-16 surrogate';
      return respond(unkeyed, problemResult(new ScopeMalformedError(reason)));
    }
    const id = storedId(scope, parsed.key);
    // Refused here as the client's error, before the store would refuse it as an argument error.
    const idBytes = Buffer.byteLength(id, 'utf8');
    if (idBytes > MAX_KEY_BYTES) {
      const reason = `the key with its scope takes ${idBytes} UTF-8 bytes; at most ${MAX_KEY_BYTES} are kept`;
      return respond(unkeyed, problemResult(new KeyMalformedError(reason)));
    }
    const report = reporter(settings, request, id, started);
    let fingerprint: Fingerprint;
    try {
      // The default fingerprint answers at once: awaited only when it is a promise.
      const computed = settings.fingerprint(request);
      fingerprint = isThenable(computed) ? await computed : computed;
    } catch (error) {
      if (error instanceof BodyRefusedError) return respond(report, problemResult(error));
      throw error;
    }
    let found: Claim;
    try {
      found = await claim(store, id, fingerprint, settings);
    } catch (error) {
      if (error instanceof EncryptionKeyMissingError || error instanceof AnswerUnreadableError) {
        return respond(report, problemResult(new SealedAnswerError(error)));
      }
      throw error;
    }
    switch (found.status) {
      case 'acquired': {
        const { owner, takenOver } = found.ownership;
        const run = { fencingToken: owner.fencingToken, takenOver };
        const execution = owned(
          found.ownership,
          settings,
          reporter(settings, request, id, started, run),
          await stepsOf(found.ownership),
        );
        return { action: 'run', execution };
      }
      case 'mismatch':
        return respond(report, problemResult(new KeyReusedError(found.record, found.members)));
      case 'expired':
        return respond(report, problemResult(new AnswerExpiredError(found.record)));
      case 'replay':
        return respond(report, replay(found.record));
      case 'outcomeUnknown':
        return respond(report, problemResult(new OutcomeUnsettledError()));
      case 'inProgress': {
        // A live lease says when it lapses at the latest, the configured estimate when the answer
        // is likely there; a row without one (unleased, or marked unrecorded) waits for its owner
        // or an operator.
        const { leaseUntil } = found;
        const leaseLeft =
          leaseUntil === null ? undefined : Math.max(1, Math.ceil(leaseUntil - settings.now()));
        const retryAfter =
          leaseLeft === undefined
            ? (settings.retryAfterSeconds ?? 1)
            : Math.min(settings.retryAfterSeconds ?? leaseLeft, leaseLeft);
        return respond(report, problemResult(new RequestInProgressError(retryAfter, found.record)));
      }
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
        return { outcome: Outcome.passedThrough, response: toWire(await handler(undefined)) };
      }
      let response: HttpResponse;
      try {
        response = await handler(decision.execution.step);
      } catch (error) {
        await decision.execution.fail(error);
        throw error;
      }
      return decision.execution.complete(response);
    },
  };
}
