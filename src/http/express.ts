import { channel } from 'node:diagnostics_channel';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { NextFunction, Request, RequestHandler, Response } from 'express';
import type { IdempotencyStore } from '../core/store.js';
import type { TransactionRunner } from '../core/transaction-runner.js';
import type { Execution } from './execution.js';
import { idempotent } from './idempotent.js';
import type { IdempotentOptions } from './options.js';
import type { IdempotentResult } from './outcome.js';
import type { IdempotencyProblem } from './problems.js';
import { type IdempotentRequest, nodeHeaders } from './request.js';
import { type HttpResponse, toWire } from './response.js';
import { transactDecision } from './transactional.js';

/** Options of {@link expressIdempotency}: the core's, plus Express-shaped hooks. */
export interface ExpressIdempotencyOptions extends IdempotentOptions {
  /** Who the key belongs to, e.g. the authenticated client; `undefined` for unscoped. */
  readonly scope?: (req: Request) => string | undefined | Promise<string | undefined>;
  /**
   * Sends the answer for a problem outcome instead of the default `application/problem+json` one.
   * It must end the response.
   */
  readonly onError?: (problem: IdempotencyProblem, req: Request, res: Response) => void;
}

type End = Response['end'];
type Write = Response['write'];

// `res.end` is overloaded; the held answer is always sent as one chunk.
function endWith(end: End, res: Response, chunk: string | Uint8Array, callback?: () => void): void {
  (
    end as unknown as (
      this: Response,
      chunk: string | Uint8Array,
      callback?: () => void,
    ) => Response
  ).call(res, chunk, callback);
}

type Headers = ReturnType<Response['getHeaders']>;

function flattenHeaders(res: Response): Record<string, string> {
  const headers: Record<string, string> = {};
  for (const [name, value] of Object.entries(res.getHeaders())) {
    if (value !== undefined)
      headers[name] = Array.isArray(value) ? value.join(', ') : String(value);
  }
  return headers;
}

function toBuffer(chunk: unknown, encoding: unknown): Buffer {
  if (typeof chunk === 'string') {
    return Buffer.from(chunk, typeof encoding === 'string' ? (encoding as BufferEncoding) : 'utf8');
  }
  return Buffer.from(chunk as Uint8Array);
}

// Sends a replay or a problem. The headers the app set before the layer ran (CORS, a request id)
// stay; anything a handler set since is dropped; the answer's own headers win over both.
function sendResult(res: Response, result: IdempotentResult, end: End, before: Headers): void {
  const wire = toWire(result.response);
  for (const name of res.getHeaderNames()) res.removeHeader(name);
  for (const [name, value] of Object.entries(before)) {
    if (value !== undefined) res.setHeader(name, value);
  }
  res.statusCode = wire.status;
  for (const [name, value] of Object.entries(wire.headers)) res.setHeader(name, value);
  if (wire.body !== undefined) res.setHeader('content-length', Buffer.byteLength(wire.body));
  endWith(end, res, wire.body ?? '');
}

// What the layer hears of a request whose handler it let through when an error leaves that
// handler (a throw, a rejection, `next(err)`), before the app's error handler answers.
const failures = new WeakMap<object, (error: unknown) => void>();
let watching = false;

interface RouterErrorContext {
  readonly req?: object;
  readonly error?: unknown;
}

// Express hands an error to the app's error handler without telling the middleware before it,
// so the layer listens where the router reports it: the `express.router.request` tracing
// channel, whose `error` event router 2.3 (Express 5) publishes once per error at its origin.
function watchRouterErrors(): void {
  if (watching) return;
  watching = true;
  channel('tracing:express.router.request:error').subscribe((message) => {
    const { req, error } = message as RouterErrorContext;
    if (req !== undefined) failures.get(req)?.(error);
  });
}

/**
 * A `verify` function for `express.json()` (and `express.text()`, `express.urlencoded()`) that
 * keeps the bytes the parser read as `req.rawBody`. The layer then fingerprints the body as the
 * client wrote it: without it, it sees only what `JSON.parse` kept, so two bodies the parser
 * reads alike (`{"n":12345678901234567891}` and `{"n":12345678901234567892}`, a member sent twice)
 * would be one request. The same `req.rawBody` others set (NestJS's `rawBody: true`, Firebase) is
 * used too.
 *
 * @example
 * ```ts
 * import express from 'express';
 * import { keepRawBody } from 'drizzle-idempotency/express';
 *
 * const app = express();
 * app.use(express.json({ verify: keepRawBody }));
 * ```
 */
export function keepRawBody(req: IncomingMessage, _res: ServerResponse, raw: Buffer): void {
  (req as IncomingMessage & { rawBody?: Buffer }).rawBody = raw;
}

/**
 * Holds back what the handler writes until its answer is recorded, so the client never sees an
 * answer that a retry would not get back: a crash before `finish` leaves the client without an
 * answer, and its retry is then replayed or run, never answered differently. An answer written
 * after an error left the handler is the app's error handler's: it is sent and the key released,
 * never stored, as on Fastify and Hono.
 */
function capture(
  req: Request,
  res: Response,
  next: NextFunction,
  execution: Execution,
  onError: ExpressIdempotencyOptions['onError'],
  before: Headers,
): void {
  const write = res.write;
  const end = res.end;
  const chunks: Buffer[] = [];
  let failed: { readonly error: unknown } | undefined;
  failures.set(req, (error) => {
    failed ??= { error };
  });
  res.write = function heldWrite(this: Response, chunk: unknown, ...rest: unknown[]): boolean {
    chunks.push(toBuffer(chunk, rest[0]));
    const callback = rest.find((arg) => typeof arg === 'function') as (() => void) | undefined;
    callback?.();
    return true;
  } as Write;
  res.end = function heldEnd(this: Response, ...args: unknown[]): Response {
    res.write = write;
    res.end = end;
    const [chunk, encoding] = args;
    const callback = args.find((arg) => typeof arg === 'function') as (() => void) | undefined;
    if (chunk !== undefined && chunk !== null && typeof chunk !== 'function') {
      chunks.push(toBuffer(chunk, encoding));
    }
    const bytes = Buffer.concat(chunks);
    failures.delete(req);
    if (failed !== undefined) {
      execution
        .fail(failed.error)
        .then(() => endWith(end, res, bytes, callback))
        .catch(next);
      return res;
    }
    // The bytes the handler sent are what is stored, never a re-parse of them.
    execution
      .complete({
        status: res.statusCode,
        headers: flattenHeaders(res),
        ...(bytes.byteLength === 0 ? {} : { body: bytes }),
      })
      .then((result) => {
        if (result.outcome !== 'problem' || res.headersSent) {
          endWith(end, res, bytes, callback);
        } else if (onError) {
          onError(result.problem, req, res);
        } else {
          sendResult(res, result, end, before);
        }
      })
      .catch(next);
    return res;
  } as End;
}

let warned = false;

// A body only a parser has seen (express.json() without keepRawBody) has lost what the parser
// collapsed, so two different bodies may share a fingerprint. Refusing it would break every app
// set up that way; the process is told once instead. An empty object cannot have lost anything.
function warnOfParsedBody(body: unknown): void {
  if (warned || body === undefined || body instanceof Uint8Array || typeof body === 'string') {
    return;
  }
  if (typeof body === 'object' && body !== null && Object.keys(body).length === 0) return;
  warned = true;
  process.emitWarning(
    'expressIdempotency sees only the parsed request body, so bodies JSON.parse reads alike (digits beyond a double, a member sent twice) share a fingerprint: give the parser keepRawBody, express.json({ verify: keepRawBody })',
    { type: 'DrizzleIdempotencyWarning', code: 'IDEMPOTENCY_RAW_BODY_MISSING' },
  );
}

// What the layer sees of an Express request: the path under the router's mount point, every
// key header line, and the body as the client wrote it when a parser kept it (`keepRawBody`).
async function idempotentRequest(
  req: Request,
  options: ExpressIdempotencyOptions,
): Promise<IdempotentRequest> {
  const { rawBody } = req as Request & { rawBody?: unknown };
  const raw = rawBody instanceof Uint8Array || typeof rawBody === 'string';
  if (!raw) warnOfParsedBody(req.body);
  return {
    method: req.method,
    path: req.baseUrl + req.path,
    headers: nodeHeaders(req.headers, req.rawHeaders),
    body: raw ? rawBody : req.body,
    scope: options.scope ? await options.scope(req) : undefined,
  };
}

/**
 * Express 5 middleware that makes a route idempotent with the `Idempotency-Key` header. Mount it
 * after the body parser (the body is part of the fingerprint) and before the route handler:
 *
 * - a new key runs the handler once; its answer is stored before it is sent;
 * - a retry gets the stored answer with `Idempotent-Replayed: true`, without running the handler;
 * - every other outcome is an `application/problem+json` answer (see {@link IdempotencyProblem});
 * - a handler that fails (a throw, a rejection, `next(err)`, or a status that is not stored)
 *   releases the key; what the app's error handler answers is sent, never stored (the error is
 *   heard on router's `express.router.request` tracing channel, router 2.3 and later);
 * - an answer that cannot be recorded (the store fails) gives a 500 `answer-not-recorded` and
 *   leaves the key pending, since the handler's effect happened (see {@link idempotent}).
 *
 * What is stored is what was sent: the status, the stored headers and the exact body bytes.
 * Replays and problems keep the headers set by middleware that ran before this one (CORS, a
 * request id). The body's bytes (`express.raw`, or `req.rawBody` as {@link keepRawBody} keeps
 * it beside `express.json`) or text (`express.text`) are fingerprinted as written; a body only
 * `express.json` parsed, as its canonical JSON (see `requestFingerprint`), with one process
 * warning (`IDEMPOTENCY_RAW_BODY_MISSING`) saying so.
 *
 * @param store - any {@link IdempotencyStore}, e.g. `openSqliteStore(path)`
 * @param options - see {@link ExpressIdempotencyOptions}
 * @example
 * ```ts
 * import express from 'express';
 * import { expressIdempotency, keepRawBody } from 'drizzle-idempotency/express';
 *
 * const app = express();
 * app.use(express.json({ verify: keepRawBody }));
 * app.post('/payments', expressIdempotency(store), (req, res) => {
 *   res.status(201).json(createPayment(req.body));
 * });
 * ```
 * @throws {@link InvalidOptionError} for a bad option, when called
 */
export function expressIdempotency(
  store: IdempotencyStore<unknown>,
  options: ExpressIdempotencyOptions = {},
): RequestHandler {
  const layer = idempotent(store, options);
  watchRouterErrors();
  return async function idempotencyMiddleware(req, res, next) {
    const before = res.getHeaders();
    try {
      const decision = await layer.begin(await idempotentRequest(req, options));
      if (decision.action === 'pass') {
        next();
      } else if (decision.action === 'run') {
        capture(req, res, next, decision.execution, options.onError, before);
        next();
      } else if (decision.result.outcome === 'problem' && options.onError) {
        options.onError(decision.result.problem, req, res);
      } else {
        sendResult(res, decision.result, res.end, before);
      }
    } catch (error) {
      next(error);
    }
  };
}

/** Options of {@link expressTransaction}: those of {@link expressIdempotency}, plus `prepare`. */
export interface ExpressTransactionOptions<P> extends ExpressIdempotencyOptions {
  /**
   * Asynchronous work after the key is claimed and before the transaction opens (a call to
   * another service, a slow computation); its result is the handler's second argument. It is
   * what lets a synchronous SQLite handler depend on an `await`. A throw releases the key. Its
   * effects are not in the transaction: make them idempotent on their own (pass the key on).
   */
  readonly prepare?: (req: Request) => P | Promise<P>;
}

/** An Express request in a transactional route: `req.tx` is the open Drizzle transaction. */
export type TransactionalRequest<TX> = Request & {
  /** The transaction the handler's writes go through; it also records the answer. */
  readonly tx: TX;
};

/**
 * The transactional form for Express: a route handler whose database writes and stored answer
 * commit in **one** transaction, fenced by the key's attempt token, before the response leaves.
 * The key is claimed first in its own short commit, so a concurrent duplicate gets 409 at once.
 * The handler reads `req.tx` and **returns** its answer (an {@link HttpResponse}) instead of
 * writing to `res`: the answer has to be known inside the transaction that records it.
 *
 * - a stored status commits the writes and the answer together (`executed`);
 * - a throw, or a status that is not stored (5xx by default), rolls the writes back and releases
 *   the key, so a retry runs cleanly;
 * - if the key was taken over meanwhile (this request outlived its lease), the whole transaction
 *   rolls back and the request gets 409 `request-superseded`: nothing of it was written;
 * - if the process dies, nothing of the handler's is committed and the retry, once the lease
 *   lapses, runs it once.
 *
 * With `sqliteTransaction(store)` (better-sqlite3) the handler must be synchronous, since such a
 * transaction cannot span an `await`; a handler returning a promise is rolled back and answered
 * with 500. With `pgTransaction(store)` it may be async. A request the layer does not cover (a
 * method outside `methods`, or no key when `required: false`) goes on to the next handler.
 *
 * @param runner - `sqliteTransaction`, `libsqlTransaction`, `pgTransaction` or
 *   `mysqlTransaction` over the store that keeps the keys
 * @param handler - runs inside the transaction, `req.tx` its only database access; its second
 *   argument is what `prepare` returned
 * @param options - see {@link ExpressTransactionOptions}
 * @example
 * ```ts
 * import express from 'express';
 * import { expressTransaction } from 'drizzle-idempotency/express';
 * import { openSqliteStore, sqliteTransaction } from 'drizzle-idempotency/sqlite';
 *
 * const store = openSqliteStore('./app.db');
 * const app = express();
 * app.post(
 *   '/payments',
 *   express.json(),
 *   expressTransaction(sqliteTransaction(store), (req) => {
 *     const payment = req.tx.insert(payments).values(req.body).returning().get();
 *     return { status: 201, body: payment };
 *   }),
 * );
 * ```
 * @throws {@link InvalidOptionError} for a bad option, when called
 */
export function expressTransaction<TX, P = undefined>(
  runner: TransactionRunner<TX>,
  handler: (req: TransactionalRequest<TX>, prepared: P) => HttpResponse | Promise<HttpResponse>,
  options: ExpressTransactionOptions<P> = {},
): RequestHandler {
  const layer = idempotent(runner.store, options);
  return async function idempotentTransaction(req, res, next) {
    const before = res.getHeaders();
    try {
      const decision = await layer.begin(await idempotentRequest(req, options));
      if (decision.action === 'pass') {
        next();
        return;
      }
      const { prepare } = options;
      const result = await transactDecision(
        decision,
        runner,
        prepare && (() => prepare(req)),
        (tx, prepared) => handler(Object.assign(req, { tx }) as TransactionalRequest<TX>, prepared),
      );
      if (result.outcome === 'problem' && options.onError) {
        options.onError(result.problem, req, res);
      } else {
        sendResult(res, result, res.end, before);
      }
    } catch (error) {
      next(error);
    }
  };
}
