import type { IdempotencyStore } from '../core/store.js';
import type { TransactionRunner } from '../core/transaction-runner.js';
import { idempotent } from './idempotent.js';
import type { IdempotentOptions } from './options.js';
import type { IdempotencyProblem } from './problems.js';
import type { IdempotentRequest } from './request.js';
import { type HttpResponse, toWire, type WireResponse } from './response.js';
import { transactDecision } from './transactional.js';

/** Options of {@link fetchIdempotency}: the core's, plus Fetch-shaped hooks. */
export interface FetchIdempotencyOptions extends IdempotentOptions {
  /** Who the key belongs to, e.g. the authenticated client; `undefined` for unscoped. */
  readonly scope?: (request: Request) => string | undefined | Promise<string | undefined>;
  /**
   * Builds the answer for a problem outcome instead of the default `application/problem+json` one.
   */
  readonly onError?: (
    problem: IdempotencyProblem,
    request: Request,
  ) => Response | Promise<Response>;
}

/**
 * A Fetch API handler: a Next.js App Router route handler, the `fetch` of `Bun.serve`,
 * `Deno.serve` or a Worker. Arguments after the request (a route context, an environment) are
 * passed through untouched.
 */
export type FetchHandler<Rest extends unknown[] = []> = (
  request: Request,
  ...rest: Rest
) => Response | Promise<Response>;

/** Wraps a {@link FetchHandler} in the idempotency layer; see {@link fetchIdempotency}. */
export type FetchIdempotencyWrapper = <Rest extends unknown[]>(
  handler: FetchHandler<Rest>,
) => (request: Request, ...rest: Rest) => Promise<Response>;

const BODYLESS_METHODS = new Set(['GET', 'HEAD']);

// The body's bytes, as the fingerprint sees them (never decoded as text, which would make every
// invalid UTF-8 sequence one replacement character). Read from a clone, so the handler still gets
// a request whose body it can read.
async function readBody(request: Request): Promise<Uint8Array | undefined> {
  if (BODYLESS_METHODS.has(request.method.toUpperCase()) || request.body === null) return undefined;
  const bytes = new Uint8Array(await request.clone().arrayBuffer());
  return bytes.byteLength === 0 ? undefined : bytes;
}

function toResponse(wire: WireResponse): Response {
  return new Response(wire.body ?? null, { status: wire.status, headers: wire.headers });
}

// What the layer sees of a Fetch request: the body read from a clone (see readBody).
async function idempotentRequest(
  request: Request,
  options: FetchIdempotencyOptions,
): Promise<IdempotentRequest> {
  return {
    method: request.method,
    path: new URL(request.url).pathname,
    headers: Object.fromEntries(request.headers),
    body: await readBody(request),
    scope: options.scope ? await options.scope(request) : undefined,
  };
}

/**
 * The idempotency layer for Fetch API handlers (`(request: Request) => Promise<Response>`):
 * Next.js App Router route handlers, `Bun.serve`, `Deno.serve`, Cloudflare-style Workers.
 *
 * - a new key runs the handler once; its answer is stored before it is returned;
 * - a retry gets the stored answer with `Idempotent-Replayed: true`, without running the handler;
 * - every other outcome is an `application/problem+json` answer (or `onError`'s);
 * - a handler that throws, or answers a status that is not stored, releases the key, so a retry
 *   runs; the error is rethrown;
 * - an answer that cannot be recorded (the store fails) gives a 500 `answer-not-recorded` and
 *   leaves the key pending, since the handler's effect happened (see {@link idempotent}).
 *
 * The handler's answer is read whole before it is stored, so a streamed answer is held until it
 * ends. What is stored is what was sent: the status, the stored headers and the exact body bytes.
 * The request body's bytes are fingerprinted (JSON read as written, see `requestFingerprint`).
 *
 * @param store - any {@link IdempotencyStore}, e.g. `openPgStore(url)`
 * @param options - see {@link FetchIdempotencyOptions}
 * @returns a function that wraps a handler
 * @example
 * ```ts
 * import { fetchIdempotency } from 'drizzle-idempotency/fetch';
 * import { openSqliteStore } from 'drizzle-idempotency/sqlite';
 *
 * const withIdempotency = fetchIdempotency(openSqliteStore('./idempotency.db'));
 *
 * // app/payments/route.ts in Next.js; the same function is a Bun.serve or Deno.serve handler.
 * export const POST = withIdempotency(async (request: Request) => {
 *   const body = (await request.json()) as { amount: number };
 *   return Response.json({ id: crypto.randomUUID(), amount: body.amount }, { status: 201 });
 * });
 * ```
 * @throws {@link InvalidOptionError} for a bad option, when called
 */
export function fetchIdempotency(
  store: IdempotencyStore<unknown>,
  options: FetchIdempotencyOptions = {},
): FetchIdempotencyWrapper {
  const layer = idempotent(store, options);

  async function problemResponse(problem: IdempotencyProblem, request: Request): Promise<Response> {
    return options.onError
      ? options.onError(problem, request)
      : toResponse(toWire(problem.toResponse()));
  }

  return <Rest extends unknown[]>(handler: FetchHandler<Rest>) =>
    async function idempotentHandler(request: Request, ...rest: Rest): Promise<Response> {
      const decision = await layer.begin(await idempotentRequest(request, options));
      if (decision.action === 'pass') return handler(request, ...rest);
      if (decision.action === 'respond') {
        const { result } = decision;
        return result.outcome === 'problem'
          ? problemResponse(result.problem, request)
          : toResponse(toWire(result.response));
      }
      const { execution } = decision;
      let answer: Response;
      let bytes: Uint8Array;
      try {
        answer = await handler(request, ...rest);
        bytes = new Uint8Array(await answer.arrayBuffer());
      } catch (error) {
        await execution.fail(error);
        throw error;
      }
      // The bytes the handler sent are what is stored, never a re-parse of them.
      const result = await execution.complete({
        status: answer.status,
        headers: Object.fromEntries(answer.headers),
        ...(bytes.byteLength === 0 ? {} : { body: bytes }),
      });
      if (result.outcome === 'problem') return problemResponse(result.problem, request);
      return new Response(bytes.byteLength === 0 ? null : bytes, {
        status: answer.status,
        statusText: answer.statusText,
        headers: answer.headers,
      });
    };
}

/** Options of {@link fetchTransaction}: those of {@link fetchIdempotency}, plus `prepare`. */
export interface FetchTransactionOptions<P> extends FetchIdempotencyOptions {
  /**
   * Asynchronous work after the key is claimed and before the transaction opens: reading the
   * body (`(request) => request.json()`), a call to another service. Its result is
   * `request.prepared` in the handler. It is what lets a synchronous SQLite handler depend on an
   * `await`. A throw releases the key. Its effects are not in the transaction: make them
   * idempotent on their own (pass the key on).
   */
  readonly prepare?: (request: Request) => P | Promise<P>;
}

/** The request a transactional Fetch handler receives: `prepared` is what `prepare` returned. */
export type PreparedRequest<P> = Request & {
  /** The result of the `prepare` option, `undefined` without it. */
  readonly prepared: P;
};

/**
 * A transactional Fetch handler: runs inside the transaction, `tx` its only database access, and
 * returns its answer. Arguments after the transaction (a route context, an environment) are those
 * the wrapped function was called with.
 */
export type FetchTransactionHandler<TX, P, Rest extends unknown[] = []> = (
  request: PreparedRequest<P>,
  tx: TX,
  ...rest: Rest
) => HttpResponse | Promise<HttpResponse>;

/**
 * The transactional form for Fetch API handlers: the handler's database writes and its stored
 * answer commit in **one** transaction, fenced by the key's attempt token, before the `Response`
 * is returned. The key is claimed first in its own short commit, so a concurrent duplicate gets
 * 409 at once. The handler receives the transaction after the request and **returns** its answer
 * (an {@link HttpResponse}), not a `Response`: the answer has to be known inside the transaction
 * that records it.
 *
 * - a stored status commits the writes and the answer together (`executed`);
 * - a throw, or a status that is not stored (5xx by default), rolls the writes back and releases
 *   the key, so a retry runs cleanly; the error is rethrown;
 * - if the key was taken over meanwhile (this request outlived its lease), the whole transaction
 *   rolls back and the request gets 409 `request-superseded`: nothing of it was written.
 *
 * With `sqliteTransaction(store)` (better-sqlite3) the handler must be synchronous, since such a
 * transaction cannot span an `await`: read the body in `prepare` and take it from
 * `request.prepared`. With `pgTransaction(store)` it may be async and read the body itself. A
 * request the layer does not cover (a method outside `methods`, or no key when
 * `required: false`) has no key to record its answer under: it is answered 404.
 *
 * @param runner - `sqliteTransaction`, `libsqlTransaction`, `pgTransaction` or
 *   `mysqlTransaction` over the store that keeps the keys
 * @param handler - see {@link FetchTransactionHandler}
 * @param options - see {@link FetchTransactionOptions}
 * @returns a Fetch API handler: a Next.js route handler, a `Bun.serve` or `Deno.serve` handler
 * @example
 * ```ts
 * import { fetchTransaction } from 'drizzle-idempotency/fetch';
 * import { openPgStore, pgTransaction } from 'drizzle-idempotency/pg';
 *
 * const store = await openPgStore(process.env.DATABASE_URL ?? '');
 *
 * export const POST = fetchTransaction(pgTransaction(store), async (request, tx) => {
 *   const [payment] = await tx.insert(payments).values(await request.json()).returning();
 *   return { status: 201, body: payment };
 * });
 * ```
 * @throws {@link InvalidOptionError} for a bad option, when called
 */
export function fetchTransaction<TX, Rest extends unknown[] = [], P = undefined>(
  runner: TransactionRunner<TX>,
  handler: FetchTransactionHandler<TX, P, Rest>,
  options: FetchTransactionOptions<P> = {},
): (request: Request, ...rest: Rest) => Promise<Response> {
  const layer = idempotent(runner.store, options);
  return async function idempotentTransaction(request: Request, ...rest: Rest): Promise<Response> {
    const decision = await layer.begin(await idempotentRequest(request, options));
    if (decision.action === 'pass') return new Response(null, { status: 404 });
    const { prepare } = options;
    const result = await transactDecision(
      decision,
      runner,
      prepare && (() => prepare(request)),
      (tx, prepared) =>
        handler(Object.assign(request, { prepared }) as PreparedRequest<P>, tx, ...rest),
    );
    if (result.outcome === 'problem' && options.onError) {
      return options.onError(result.problem, request);
    }
    return toResponse(toWire(result.response));
  };
}
