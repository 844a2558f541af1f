import type { Context, MiddlewareHandler } from 'hono';
import type { IdempotencyStore } from '../core/store.js';
import type { TransactionRunner } from '../core/transaction-runner.js';
import { idempotent } from './idempotent.js';
import type { IdempotentOptions } from './options.js';
import type { IdempotencyProblem } from './problems.js';
import type { IdempotentRequest } from './request.js';
import { type HttpResponse, toWire, type WireResponse } from './response.js';
import { transactDecision } from './transactional.js';

/** Options of {@link honoIdempotency}: the core's, plus Hono-shaped hooks. */
export interface HonoIdempotencyOptions extends IdempotentOptions {
  /** Who the key belongs to, e.g. the authenticated client; `undefined` for unscoped. */
  readonly scope?: (c: Context) => string | undefined | Promise<string | undefined>;
  /**
   * Builds the answer for a problem outcome instead of the default `application/problem+json` one.
   */
  readonly onError?: (problem: IdempotencyProblem, c: Context) => Response | Promise<Response>;
}

const BODYLESS_METHODS = new Set(['GET', 'HEAD']);

// The body's bytes, as the fingerprint sees them (never decoded as text, which would make every
// invalid UTF-8 sequence one replacement character). Hono caches them, so the handler can still
// read the body in any form.
async function readBody(c: Context): Promise<Uint8Array | undefined> {
  if (BODYLESS_METHODS.has(c.req.method)) return undefined;
  const bytes = new Uint8Array(await c.req.arrayBuffer());
  return bytes.byteLength === 0 ? undefined : bytes;
}

// Through `c.body`, so headers that middleware before this one set (CORS, a request id) are kept,
// and the answer's own headers win over them.
function send(c: Context, wire: WireResponse): Response {
  const status = wire.status as never;
  return wire.body === undefined
    ? c.body(null, status, wire.headers)
    : c.body(wire.body as Uint8Array<ArrayBuffer>, status, wire.headers);
}

// What the layer sees of a Hono request: the body as bytes (see readBody), and the path as it was
// sent, not `c.req.path`, which Hono percent-decodes: the fingerprint normalises every adapter's
// path one way.
async function idempotentRequest(
  c: Context,
  options: HonoIdempotencyOptions,
): Promise<IdempotentRequest> {
  return {
    method: c.req.method,
    path: new URL(c.req.url).pathname,
    headers: c.req.header(),
    body: await readBody(c),
    scope: options.scope ? await options.scope(c) : undefined,
  };
}

/**
 * Hono middleware that makes routes idempotent with the `Idempotency-Key` header:
 *
 * - a new key runs the handler once; its answer is stored before it is returned;
 * - a retry gets the stored answer with `Idempotent-Replayed: true`, without running the handler;
 * - every other outcome is an `application/problem+json` answer (or `onError`'s);
 * - a handler that throws (Hono's `onError` answered instead) or answers a status that is not
 *   stored releases the key, so a retry runs;
 * - an answer that cannot be recorded (the store fails) gives a 500 `answer-not-recorded` and
 *   leaves the key pending, since the handler's effect happened (see {@link idempotent}).
 *
 * What is stored is what was sent: the status, the stored headers and the exact body bytes. The
 * request body's bytes are fingerprinted (JSON read as written, see `requestFingerprint`).
 * Replays and problems keep the headers set by middleware that ran before this one.
 *
 * @param store - any {@link IdempotencyStore}, e.g. `openSqliteStore(path)`
 * @param options - see {@link HonoIdempotencyOptions}
 * @example
 * ```ts
 * import { Hono } from 'hono';
 * import { honoIdempotency } from 'drizzle-idempotency/hono';
 *
 * const app = new Hono();
 * app.post('/payments', honoIdempotency(store, { ttlSeconds: 72 * 3600 }), async (c) =>
 *   c.json(createPayment(await c.req.json()), 201),
 * );
 * ```
 * @throws {@link InvalidOptionError} for a bad option, when called
 */
export function honoIdempotency(
  store: IdempotencyStore<unknown>,
  options: HonoIdempotencyOptions = {},
): MiddlewareHandler {
  const layer = idempotent(store, options);

  async function problemResponse(problem: IdempotencyProblem, c: Context): Promise<Response> {
    return options.onError ? options.onError(problem, c) : send(c, toWire(problem.toResponse()));
  }

  return async function idempotencyMiddleware(c, next) {
    const decision = await layer.begin(await idempotentRequest(c, options));
    if (decision.action === 'pass') {
      await next();
      return;
    }
    if (decision.action === 'respond') {
      const { result } = decision;
      return result.outcome === 'problem'
        ? problemResponse(result.problem, c)
        : send(c, toWire(result.response));
    }
    const { execution } = decision;
    try {
      await next();
    } catch (error) {
      await execution.fail(error);
      throw error;
    }
    if (c.error !== undefined) {
      // The handler threw and Hono's error handler answered: the key is released, not stored.
      await execution.fail(c.error);
      return;
    }
    const answer = c.res;
    const bytes = new Uint8Array(await answer.arrayBuffer());
    // The bytes the handler sent are what is stored, never a re-parse of them.
    const result = await execution.complete({
      status: answer.status,
      headers: Object.fromEntries(answer.headers),
      ...(bytes.byteLength === 0 ? {} : { body: bytes }),
    });
    // Setting c.res merges the previous response's headers into the new one: clear it first.
    c.res = undefined;
    c.res =
      result.outcome === 'problem'
        ? await problemResponse(result.problem, c)
        : new Response(bytes.byteLength === 0 ? null : bytes, {
            status: answer.status,
            statusText: answer.statusText,
            headers: answer.headers,
          });
  };
}

/** The Hono environment of a transactional route: `c.var.tx` is the open Drizzle transaction. */
export interface TransactionEnv<TX> {
  Variables: {
    /** The transaction the handler's writes go through; it also records the answer. */
    tx: TX;
  };
}

/**
 * The transactional form for Hono: a route handler whose database writes and stored answer commit
 * in **one** transaction, fenced by the key's attempt token, before the response leaves. The key is
 * claimed first in its own short commit, so a concurrent duplicate gets 409 at once. The handler
 * reads `c.var.tx` and **returns** its answer (an {@link HttpResponse}), which is recorded inside
 * that transaction. A throw or a status that is not stored rolls the writes back and releases the
 * key; a takeover meanwhile (the request outlived its lease) rolls everything back and answers 409
 * `request-superseded`.
 *
 * With `sqliteTransaction(store)` (better-sqlite3) the handler must be synchronous, since such a
 * transaction cannot span an `await`: read the body before it, with a validator middleware, and
 * take it with the synchronous `c.req.valid('json')`. With `pgTransaction(store)` it may be async.
 * A request the layer does not cover (a method outside `methods`, or no key when
 * `required: false`) goes on to the next handler.
 *
 * @param runner - `sqliteTransaction`, `libsqlTransaction`, `pgTransaction` or
 *   `mysqlTransaction` over the store that keeps the keys
 * @param handler - runs inside the transaction, `c.var.tx` its only database access
 * @param options - see {@link HonoIdempotencyOptions}
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
 *   honoTransaction(pgTransaction(store), async (c) => {
 *     const [payment] = await c.var.tx.insert(payments).values(await c.req.json()).returning();
 *     return { status: 201, body: payment };
 *   }),
 * );
 * ```
 * @throws {@link InvalidOptionError} for a bad option, when called
 */
export function honoTransaction<TX>(
  runner: TransactionRunner<TX>,
  handler: (c: Context<TransactionEnv<TX>>) => HttpResponse | Promise<HttpResponse>,
  options: HonoIdempotencyOptions = {},
): MiddlewareHandler {
  const layer = idempotent(runner.store, options);
  return async function idempotentTransaction(c, next) {
    const decision = await layer.begin(await idempotentRequest(c, options));
    if (decision.action === 'pass') {
      await next();
      return;
    }
    const result = await transactDecision(decision, runner, undefined, (tx) => {
      const context = c as unknown as Context<TransactionEnv<TX>>;
      context.set('tx', tx);
      return handler(context);
    });
    return result.outcome === 'problem' && options.onError
      ? options.onError(result.problem, c)
      : send(c, toWire(result.response));
  };
}
