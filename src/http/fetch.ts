import type { LeasedIdempotencyStore } from '../core/store.js';
import type { TransactionRunner } from '../core/transaction-runner.js';
import {
  type AdapterOptions,
  type AdapterTransactionOptions,
  adapterLayer,
  type Port,
  releasingOnThrow,
  type TransactionalHandler,
} from './port.js';
import { webAnswer, webRequest, webResponse } from './web.js';

export { idempotencyStep } from './steps.js';

/** Options of {@link fetchIdempotency}: the layer's, `scope` and `onError` given the `Request`. */
export type FetchIdempotencyOptions = AdapterOptions<Request>;

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

// One request on the Fetch API: the body read from a clone, so the handler still gets a request
// whose body it can read.
function fetchPort(
  request: Request,
  pass: () => Response | Promise<Response>,
): Port<Request, Response> {
  return {
    request,
    read: () =>
      webRequest(request, Object.fromEntries(request.headers), () => request.clone().arrayBuffer()),
    send: webResponse,
    pass,
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
 *   leaves the key pending, since the handler's effect happened (see `idempotent`).
 *
 * The handler's answer is read whole before it is stored, so a streamed answer is held until it
 * ends. What is stored is what was sent: the status, the stored headers and the exact body bytes.
 * The request body's bytes are fingerprinted (JSON read as written, see `requestFingerprint`).
 *
 * @param store - any {@link LeasedIdempotencyStore}, e.g. `openPgStore(url)`
 * @param options - see {@link FetchIdempotencyOptions}
 * @returns a function that wraps a handler
 * @example
 * ```ts
 * import { fetchIdempotency } from 'drizzle-idempotency/fetch';
 * import { openSqliteStore } from 'drizzle-idempotency/sqlite';
 *
 * const withIdempotency = fetchIdempotency(openSqliteStore('./idempotency.db'), {
 *   scope: (request) => clientIdOf(request),
 * });
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
  store: LeasedIdempotencyStore<unknown>,
  options: FetchIdempotencyOptions,
): FetchIdempotencyWrapper {
  const layer = adapterLayer(store, options);
  return <Rest extends unknown[]>(handler: FetchHandler<Rest>) =>
    function idempotentHandler(request: Request, ...rest: Rest): Promise<Response> {
      const port = fetchPort(request, () => handler(request, ...rest));
      return layer.serve(port, async (execution) => {
        const ran = await releasingOnThrow(execution, async () =>
          webAnswer(await handler(request, ...rest)),
        );
        return layer.finish(port, execution, ran.answer, ran.copy);
      });
    };
}

/** Options of {@link fetchTransaction}: those of {@link fetchIdempotency}, plus `prepare`. */
export type FetchTransactionOptions<P> = AdapterTransactionOptions<Request, P>;

/**
 * A transactional Fetch handler: runs inside the transaction and returns its answer. It gets the
 * request, the transaction (its only database access), what `prepare` returned, then the
 * arguments the wrapped function was called with (a route context, an environment).
 */
export type FetchTransactionHandler<TX, P, Rest extends unknown[] = []> = TransactionalHandler<
  Request,
  TX,
  P,
  Rest
>;

/**
 * The transactional form for Fetch API handlers: the handler's database writes and its stored
 * answer commit in **one** transaction, fenced by the key's fencing token, before the `Response`
 * is returned. The key is claimed first in its own short commit, so a concurrent duplicate gets
 * 409 at once. The handler receives `tx` and `prepared` after the request and **returns** its
 * answer (an `HttpResponse`), not a `Response`: the answer has to be known inside the transaction
 * that records it.
 *
 * - a stored status commits the writes and the answer together (`executed`);
 * - a throw, or a status that is not stored (5xx by default), rolls the writes back and releases
 *   the key, so a retry runs cleanly; the error is rethrown;
 * - if the key was taken over meanwhile (this request outlived its lease), the whole transaction
 *   rolls back and the request gets 409 `request-superseded`: nothing of it was written.
 *
 * With `sqliteTransaction(store)` (better-sqlite3) the handler must be synchronous, since such a
 * transaction cannot span an `await`: read the body in `prepare` and take it as `prepared`. With
 * `pgTransaction(store)` it may be async and read the body itself. A request the layer does not
 * cover (a method outside `methods`, or no key when `required: false`) has no key to record its
 * answer under and no next route to go on to: it is answered 404, the Fetch API's not found.
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
 * }, { scope: 'global' });
 * ```
 * @throws {@link InvalidOptionError} for a bad option, when called
 */
export function fetchTransaction<TX, Rest extends unknown[] = [], P = undefined>(
  runner: TransactionRunner<TX>,
  handler: FetchTransactionHandler<TX, P, Rest>,
  options: FetchTransactionOptions<P>,
): (request: Request, ...rest: Rest) => Promise<Response> {
  const layer = adapterLayer(runner.store, options);
  return function idempotentTransaction(request: Request, ...rest: Rest): Promise<Response> {
    const port = fetchPort(request, () => new Response(null, { status: 404 }));
    return layer.transact(port, runner, handler, ...rest);
  };
}
