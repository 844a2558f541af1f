import type { Context, MiddlewareHandler, Next } from 'hono';
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
import type { WireResponse } from './response.js';
import { webAnswer, webRequest } from './web.js';

export type { TransactionalHandler } from './port.js';
export { idempotencyStep } from './steps.js';

/** Options of {@link honoIdempotency}: the layer's, `scope` and `onError` given the `Context`. */
export type HonoIdempotencyOptions = AdapterOptions<Context>;

/** Options of {@link honoTransaction}: those of {@link honoIdempotency}, plus `prepare`. */
export type HonoTransactionOptions<P> = AdapterTransactionOptions<Context, P>;

// Through `c.body`, so headers that middleware before this one set (CORS, a request id) are kept,
// and the answer's own headers win over them.
function honoResponse(c: Context, answer: WireResponse): Response {
  const status = answer.status as never;
  return answer.body === undefined
    ? c.body(null, status, answer.headers)
    : c.body(answer.body as Uint8Array<ArrayBuffer>, status, answer.headers);
}

// One request on Hono. The body is read through Hono, which caches it, so the handler can still
// read it in any form; the path is the one sent, not `c.req.path`, which Hono percent-decodes.
function honoPort(c: Context, next: Next): Port<Context, Response | undefined> {
  return {
    request: c,
    read: () => webRequest(c.req.raw, c.req.header(), () => c.req.arrayBuffer()),
    send: (answer) => honoResponse(c, answer),
    async pass() {
      await next();
      return undefined;
    },
  };
}

// The same request once the handler answered: an answer of the layer replaces the handler's.
function answeredPort(port: Port<Context, Response | undefined>): Port<Context, undefined> {
  const c = port.request;
  return {
    request: c,
    read: port.read,
    send(answer) {
      // Setting c.res merges the previous response's headers into the new one: clear it first.
      c.res = undefined;
      c.res = honoResponse(c, answer);
      return undefined;
    },
    pass: () => undefined,
  };
}

/**
 * Hono middleware that makes routes idempotent with the `Idempotency-Key` header:
 *
 * - a new key runs the handler once; its answer is stored before it is returned;
 * - a retry gets the stored answer with `Idempotent-Replayed: true`, without running the handler;
 * - every other outcome is an `application/problem+json` answer (or `onError`'s);
 * - a handler that throws (Hono's `onError` answered instead) or answers a status that is not
 *   stored releases the key, so a retry runs; so does a streamed answer (`c.body(stream)`) whose
 *   stream errors;
 * - an answer that cannot be recorded (the store fails) gives a 500 `answer-not-recorded` and
 *   leaves the key pending, since the handler's effect happened (see `idempotent`).
 *
 * What is stored is what was sent: the status, the stored headers and the exact body bytes. The
 * request body's bytes are fingerprinted (JSON read as written, see `requestFingerprint`).
 * Replays and problems keep the headers set by middleware that ran before this one.
 *
 * @param store - any {@link LeasedIdempotencyStore}, e.g. `openSqliteStore(path)`
 * @param options - see {@link HonoIdempotencyOptions}
 * @example
 * ```ts
 * import { Hono } from 'hono';
 * import { honoIdempotency } from 'drizzle-idempotency/hono';
 *
 * const app = new Hono();
 * app.post('/payments', honoIdempotency(store, { scope: 'global', ttlSeconds: 72 * 3600 }), async (c) =>
 *   c.json(createPayment(await c.req.json()), 201),
 * );
 * ```
 * @throws {@link InvalidOptionError} for a bad option, when called
 */
export function honoIdempotency(
  store: LeasedIdempotencyStore<unknown>,
  options: HonoIdempotencyOptions,
): MiddlewareHandler {
  const layer = adapterLayer(store, options);
  return function idempotencyMiddleware(c, next) {
    const port = honoPort(c, next);
    return layer.serve(port, async (execution) => {
      await releasingOnThrow(execution, next);
      if (c.error !== undefined) {
        // The handler threw and Hono's error handler answered: the key is released, not stored.
        await execution.fail(c.error);
        return undefined;
      }
      // A streamed answer (`c.body(stream)`) is read here: a stream that errors releases the key.
      const ran = await releasingOnThrow(execution, () => webAnswer(c.res));
      return layer.finish(answeredPort(port), execution, ran.answer, () => {
        c.res = undefined;
        c.res = ran.copy();
        return undefined;
      });
    });
  };
}

/**
 * The transactional form for Hono: a route handler whose database writes and stored answer commit
 * in **one** transaction, fenced by the key's fencing token, before the response leaves. The key is
 * claimed first in its own short commit, so a concurrent duplicate gets 409 at once. The handler
 * gets the context, then `tx` and `prepared`, and **returns** its answer (an `HttpResponse`),
 * which is recorded inside that transaction. A throw or a status that is not stored rolls the
 * writes back and releases the key; a takeover meanwhile (the request outlived its lease) rolls
 * everything back and answers 409 `request-superseded`.
 *
 * With `sqliteTransaction(store)` (better-sqlite3) the handler must be synchronous, since such a
 * transaction cannot span an `await`: read the body in `prepare` (`(c) => c.req.json()`) and take
 * it as `prepared`. With `pgTransaction(store)` it may be async. A request the layer does not
 * cover (a method outside `methods`, or no key when `required: false`) goes on to the next
 * handler, and to Hono's not found when there is none.
 *
 * @param runner - `sqliteTransaction`, `libsqlTransaction`, `pgTransaction` or
 *   `mysqlTransaction` over the store that keeps the keys
 * @param handler - runs inside the transaction, `tx` its only database access
 * @param options - see {@link HonoTransactionOptions}
 * @example
 * ```ts
 * import { Hono } from 'hono';
 * import { honoTransaction } from 'drizzle-idempotency/hono';
 * import { openPgStore, pgTransaction } from 'drizzle-idempotency/pg';
 *
 * const store = await openPgStore(process.env.DATABASE_URL ?? '');
 * const app = new Hono();
 * app.post(
 *   '/payments',
 *   honoTransaction(pgTransaction(store), async (c, tx) => {
 *     const [payment] = await tx.insert(payments).values(await c.req.json()).returning();
 *     return { status: 201, body: payment };
 *   }, { scope: (c) => clientIdOf(c) }),
 * );
 * ```
 * @throws {@link InvalidOptionError} for a bad option, when called
 */
export function honoTransaction<TX, P = undefined>(
  runner: TransactionRunner<TX>,
  handler: TransactionalHandler<Context, TX, P>,
  options: HonoTransactionOptions<P>,
): MiddlewareHandler {
  const layer = adapterLayer(runner.store, options);
  return (c, next) => layer.transact(honoPort(c, next), runner, handler);
}
