import { InvalidOptionError } from '../core/errors.js';
import type { LeasedIdempotencyStore } from '../core/store.js';
import type { TransactionRunner } from '../core/transaction-runner.js';
import type { Execution } from './execution.js';
import { idempotent } from './idempotent.js';
import type { IdempotentOptions } from './options.js';
import type { IdempotentResult } from './outcome.js';
import type { IdempotencyProblem } from './problems.js';
import type { IdempotentRequest } from './request.js';
import { type HttpResponse, toWire, type WireResponse } from './response.js';
import { attachStep } from './steps.js';
import { transactDecision } from './transactional.js';

/**
 * Who a key belongs to: a function of the framework's request naming its caller (the
 * authenticated client, the tenant), or `'global'` for an API without callers, where every request
 * shares one space of keys. A function may return `undefined` for a request without a caller: its
 * key is then in the global space.
 */
export type ScopeOption<R> =
  | ((request: R) => string | undefined | Promise<string | undefined>)
  | typeof GLOBAL_SCOPE;

/** The explicit `scope` of an API whose keys are shared by every caller. */
const GLOBAL_SCOPE = 'global';

/**
 * Refuses a missing or mistyped scope decision: keys are bound to their caller unless the app says
 * they are not, so a forgotten `scope` never lets one client replay another's answer.
 *
 * @throws {@link InvalidOptionError} for anything but a function or `'global'`
 */
export function assertScopeDecision(scope: unknown, where: string): void {
  if (typeof scope === 'function' || scope === GLOBAL_SCOPE) return;
  const got = scope === undefined ? 'none was given' : `got ${typeof scope} ${String(scope)}`;
  throw new InvalidOptionError(
    `${where} needs a scope decision: \`scope: (request) => callerId\` to bind each key to its caller, or \`scope: 'global'\` for an API whose callers share their keys; ${got}`,
  );
}

/** The options of every adapter: the layer's, plus hooks that get the framework's request `R`. */
export interface AdapterOptions<R> extends IdempotentOptions {
  /**
   * Who the key belongs to (required): a function of the request naming its caller, e.g. the
   * authenticated client, so a key another caller sent never replays or blocks this one's answer;
   * or `'global'` for an API without callers. See {@link ScopeOption}.
   */
  readonly scope: ScopeOption<R>;
  /**
   * The answer for a problem outcome instead of the default `application/problem+json` one: a
   * status, headers and a body (bytes, a JSON value, or a string with a non-JSON content type),
   * as a transactional handler returns it. It shapes every problem, those answered before the
   * handler runs (400, 409, 410, 422) and after it (500 `answer-not-recorded`, 409
   * `request-superseded`, 503 `request-rolled-back`); like every answer of the layer, it keeps the
   * headers set before the layer ran (CORS, a request id).
   */
  readonly onError?: (
    problem: IdempotencyProblem,
    request: R,
  ) => HttpResponse | Promise<HttpResponse>;
}

/**
 * The options of every transactional form: those of {@link AdapterOptions} but `steps` (the
 * handler's writes and its answer commit in one transaction, which is the one step), plus
 * `prepare`.
 */
export interface AdapterTransactionOptions<R, P> extends Omit<AdapterOptions<R>, 'steps'> {
  /**
   * Asynchronous work after the key is claimed and before the transaction opens (reading the
   * body, a call to another service); its result is the handler's third argument, `prepared`. It is
   * what lets a synchronous SQLite handler depend on an `await`. A throw releases the key. Its
   * effects are not in the transaction: make them idempotent on their own (pass the key on).
   */
  readonly prepare?: (request: R) => P | Promise<P>;
}

/**
 * A transactional handler, the same on every adapter: the framework's request, the open
 * transaction (its only database access; it also records the answer), what `prepare` returned
 * (`undefined` without it), then whatever else the framework passes (a Fetch handler's route
 * context). It **returns** its answer: the answer has to be known inside the transaction that
 * records it. Give `prepare`'s parameter its type (`(req: Request) => …`) so that `prepared` gets
 * the type of what it returns: TypeScript reads the handler first.
 */
export type TransactionalHandler<R, TX, P, Rest extends unknown[] = []> = (
  request: R,
  tx: TX,
  prepared: P,
  ...rest: Rest
) => HttpResponse | Promise<HttpResponse>;

/** What an adapter reads of a request; the layer adds the scope, from the `scope` option. */
export type ReadRequest = Omit<IdempotentRequest, 'scope'>;

/**
 * One request as a framework serves it: how the layer reads it and answers it. `Sent` is what
 * the framework expects back from an answer (a `Response`, a payload, nothing).
 */
export interface Port<R, Sent> {
  /** The framework's request, handed to `scope`, `onError`, `prepare` and the handler. */
  readonly request: R;
  /** The method, the path without its query, the headers and the body (bytes when they are kept). */
  read(): ReadRequest | Promise<ReadRequest>;
  /**
   * Sends an answer as these bytes, status and headers: a replay, a problem, a recorded answer.
   * The headers set before the layer ran stay; those a handler set since do not.
   */
  send(answer: WireResponse): Sent | Promise<Sent>;
  /** Sends a problem no `onError` shaped; without it, `send` sends the problem's answer. */
  problem?(problem: IdempotencyProblem, answer: WireResponse): Sent | Promise<Sent>;
  /**
   * Lets a request the layer does not cover (a method outside `methods`, no key where none is
   * required) go on as if the layer were not there: to the handler it wraps, or, for a
   * transactional route (which cannot run without a key to record under), to the next route and
   * the framework's not-found answer.
   */
  pass(): Sent | Promise<Sent>;
}

/** The layer as an adapter drives it, over one store and the adapter's options. */
export interface AdapterLayer<R, P> {
  /**
   * Decides on the request: answers it (a replay, a problem), passes it, or calls `run` with the
   * {@link Execution} the handler then runs under (the adapter calls {@link AdapterLayer.finish}
   * with its answer, or `execution.fail` when it threw).
   */
  serve<Sent>(
    port: Port<R, Sent>,
    run: (execution: Execution) => Sent | Promise<Sent>,
  ): Promise<Sent>;
  /**
   * Records the handler's answer; a problem (the answer could not be recorded, the key was taken
   * over) is sent instead of it. Otherwise `forward` sends the handler's own answer.
   */
  finish<Sent>(
    port: Port<R, Sent>,
    execution: Execution,
    answer: HttpResponse,
    forward: (result: IdempotentResult) => Sent | Promise<Sent>,
  ): Promise<Sent>;
  /** The transactional form: claims the key, runs `handler` in `runner`'s transaction, answers. */
  transact<Sent, TX, Rest extends unknown[]>(
    port: Port<R, Sent>,
    runner: TransactionRunner<TX>,
    handler: TransactionalHandler<R, TX, P, Rest>,
    ...rest: Rest
  ): Promise<Sent>;
}

function assertHook(value: unknown, name: string): void {
  if (value !== undefined && typeof value !== 'function') {
    throw new InvalidOptionError(`${name} must be a function, got ${typeof value}`);
  }
}

/**
 * Runs the handler of a request the layer let through; a throw releases its key (so a retry runs)
 * and is rethrown, to the framework's error handling.
 */
export async function releasingOnThrow<T>(
  execution: Execution,
  handler: () => T | Promise<T>,
): Promise<T> {
  try {
    return await handler();
  } catch (error) {
    await execution.fail(error);
    throw error;
  }
}

/**
 * The answer a handler sent, as a framework captured it: the status, the headers and the exact
 * bytes (none: no body). These bytes are what is stored, never a re-parse of them.
 */
export function capturedAnswer(
  status: number,
  headers: Readonly<Record<string, string>>,
  bytes: Uint8Array,
): WireResponse {
  return { status, headers, body: bytes.byteLength === 0 ? undefined : bytes };
}

/**
 * The layer as every adapter drives it: the one place where a problem becomes an answer
 * (`onError`'s, or the default), the scope is asked for, and a transactional handler gets its
 * transaction.
 *
 * @throws {@link InvalidOptionError} for a bad option, when called
 */
export function adapterLayer<R, P = undefined>(
  store: LeasedIdempotencyStore<unknown>,
  options: AdapterOptions<R> & Pick<AdapterTransactionOptions<R, P>, 'prepare'>,
): AdapterLayer<R, P> {
  assertScopeDecision(options.scope, 'the idempotency middleware');
  const layer = idempotent(store, options);
  const { onError, prepare } = options;
  const scope = options.scope === GLOBAL_SCOPE ? undefined : options.scope;
  assertHook(onError, 'onError');
  assertHook(prepare, 'prepare');

  async function seen<Sent>(port: Port<R, Sent>): Promise<IdempotentRequest> {
    const read = await port.read();
    return { ...read, scope: scope ? await scope(port.request) : undefined };
  }

  async function respond<Sent>(port: Port<R, Sent>, result: IdempotentResult): Promise<Sent> {
    if (result.outcome !== 'problem') return port.send(result.response);
    if (onError) return port.send(toWire(await onError(result.problem, port.request)));
    return port.problem
      ? port.problem(result.problem, result.response)
      : port.send(result.response);
  }

  return {
    async serve(port, run) {
      const decision = await layer.begin(await seen(port));
      if (decision.action === 'pass') return port.pass();
      if (decision.action === 'respond') return respond(port, decision.result);
      const { execution } = decision;
      if (execution.step !== undefined) attachStep(port.request as object, execution.step);
      return run(execution);
    },

    async finish(port, execution, answer, forward) {
      const result = await execution.complete(answer);
      return result.outcome === 'problem' ? respond(port, result) : forward(result);
    },

    async transact(port, runner, handler, ...rest) {
      const decision = await layer.begin(await seen(port));
      if (decision.action === 'pass') return port.pass();
      const { request } = port;
      const result = await transactDecision(
        decision,
        runner,
        prepare && (() => prepare(request)),
        (tx, prepared) => handler(request, tx, prepared, ...rest),
      );
      return respond(port, result);
    },
  };
}
