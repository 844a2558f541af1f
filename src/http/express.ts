import { channel } from 'node:diagnostics_channel';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { ErrorRequestHandler, NextFunction, Request, RequestHandler, Response } from 'express';
import type { LeasedIdempotencyStore } from '../core/store.js';
import type { TransactionRunner } from '../core/transaction-runner.js';
import type { AnswerStream } from './answer-stream.js';
import type { Execution } from './execution.js';
import { abandonClaim, watchNodeResponse } from './node-response.js';
import {
  type AdapterLayer,
  type AdapterOptions,
  type AdapterTransactionOptions,
  adapterLayer,
  capturedAnswer,
  type Port,
  type ReadRequest,
  type TransactionalHandler,
} from './port.js';
import { nodeHeaders } from './request.js';
import {
  answerHeaders,
  flattenHeaders,
  type OutgoingHeaders,
  type WireResponse,
} from './response.js';

export type { TransactionalHandler } from './port.js';
export { idempotencyStep } from './steps.js';

/** Options of {@link expressIdempotency}: the layer's, `scope` and `onError` given the `req`. */
export type ExpressIdempotencyOptions = AdapterOptions<Request>;

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

function toBuffer(chunk: unknown, encoding: unknown): Buffer {
  if (typeof chunk === 'string') {
    return Buffer.from(chunk, typeof encoding === 'string' ? (encoding as BufferEncoding) : 'utf8');
  }
  return Buffer.from(chunk as Uint8Array);
}

// Sends an answer of the layer, with the headers of `answerHeaders`.
function sendAnswer(res: Response, answer: WireResponse, before: OutgoingHeaders): void {
  for (const name of res.getHeaderNames()) res.removeHeader(name);
  for (const [name, value] of Object.entries(answerHeaders(before, answer))) {
    res.setHeader(name, value);
  }
  res.statusCode = answer.status;
  if (answer.body !== undefined) res.setHeader('content-length', answer.body.byteLength);
  endWith(res.end, res, answer.body ?? '');
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
 * Error middleware that tells the layer of an error a handler passed on, for Express 4 (and an
 * older router), whose router publishes no error on the tracing channel the layer listens on.
 * Without it, the layer there judges the error handler's answer by its status alone: a 4xx it
 * answers is stored as the handler's, and an `OutcomeUnknownError` answered 500 releases the key
 * instead of holding it, so a retry runs the handler again. Mount it after the routes and before
 * your own error handlers; it passes every error on unchanged. On Express 5 it is not needed, and
 * harmless.
 *
 * @example
 * ```ts
 * import express from 'express';
 * import { expressIdempotency, expressIdempotencyErrors } from 'drizzle-idempotency/express';
 *
 * const app = express();
 * const idempotency = expressIdempotency(store, { scope: 'global' });
 * app.post('/payments', express.json(), idempotency, async (req, res, next) => {
 *   try {
 *     res.status(201).json(await createPayment(req.body));
 *   } catch (error) {
 *     next(error); // Express 4 hears of a rejection only this way
 *   }
 * });
 * app.use(expressIdempotencyErrors());
 * app.use((error: Error, req: express.Request, res: express.Response, next: express.NextFunction) => {
 *   res.status(409).json({ error: error.message });
 * });
 * ```
 */
export function expressIdempotencyErrors(): ErrorRequestHandler {
  return function idempotencyErrors(error, req, _res, next) {
    failures.get(req)?.(error);
    next(error);
  };
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

type WriteHead = Response['writeHead'];

// Node writes the headers `writeHead(status, headers)` is given straight into the header block
// when no header was set before (`app.disable('x-powered-by')`), where `getHeaders()` never sees
// them, so the recorded answer would lose its Location and content type. Set through `setHeader`
// first, they are merged as Node merges them when a header was set: an object's members, or a
// flat array's name/value pairs.
function mergingWriteHead(res: Response): void {
  const writeHead = res.writeHead;
  res.writeHead = function mergedWriteHead(this: Response, status: number, ...rest: unknown[]) {
    const [reason, headers] = typeof rest[0] === 'string' ? rest : [undefined, rest[0]];
    if (Array.isArray(headers)) {
      for (let n = 0; n + 1 < headers.length; n += 2) {
        if (headers[n]) this.setHeader(String(headers[n]), headers[n + 1]);
      }
    } else if (typeof headers === 'object' && headers !== null) {
      for (const [name, value] of Object.entries(headers)) {
        if (value !== undefined) this.setHeader(name, value);
      }
    }
    const plain = writeHead as (this: Response, status: number, reason?: string) => Response;
    return typeof reason === 'string' ? plain.call(this, status, reason) : plain.call(this, status);
  } as WriteHead;
}

// Calls `res.end` (overloaded) as the handler called it.
function endAs(end: End, res: Response, args: unknown[]): Response {
  return (end as unknown as (this: Response, ...rest: unknown[]) => Response).apply(res, args);
}

// The chunk a `res.write` or `res.end` call sends, if any.
function chunkOf(args: readonly unknown[]): Buffer | undefined {
  const [chunk, encoding] = args;
  if (chunk === undefined || chunk === null || typeof chunk === 'function') return undefined;
  return toBuffer(chunk, encoding);
}

/**
 * Holds back an answer the handler ends in one go (`res.json`, `res.send`, `res.end(body)`) until
 * it is recorded, so the client never sees an answer that a retry would not get back: a crash
 * before `finish` leaves the client without an answer, and its retry is then replayed or run,
 * never answered differently. An answer written in parts (`res.write`, a piped stream, SSE) is a
 * stream: it is sent as it is written and teed (see `Execution.stream`), and recorded at its end
 * or as soon as it can no longer be kept.
 * An answer written after an error left the handler is the app's error handler's: it is sent and
 * the key released, never stored, as on Fastify and Hono.
 */
function capture(
  layer: AdapterLayer<Request, unknown>,
  port: Port<Request, void>,
  res: Response,
  next: NextFunction,
  execution: Execution,
): void {
  const req = port.request;
  const write = res.write;
  const end = res.end;
  mergingWriteHead(res);
  let failed: { readonly error: unknown } | undefined;
  let streamed: AnswerStream | undefined;
  // Once the answer is ended or the response closed, what is written goes out as written. Code
  // that took `res.write` before it was put back (compression() on the route) still calls these
  // wrappers, so they check this rather than rely on being replaced.
  let over = false;
  const letThrough = () => {
    over = true;
    failures.delete(req);
    res.write = write;
    res.end = end;
  };
  // A response closed unanswered after a failure (a stream errored into `pipeline(stream, res)`,
  // `res.destroy()`, an error once the headers were out, which Express answers by destroying the
  // socket) never reaches `res.end`: its key is released here instead. A stream the client left
  // before its end is recorded without its answer.
  const watch = watchNodeResponse(res, ({ failure }) => {
    letThrough();
    if (streamed === undefined) abandonClaim(execution, failure?.error);
    else if (failure === undefined) streamed.left().catch(() => undefined);
    else streamed.fail(failure.error).catch(() => undefined);
  });
  failures.set(req, (error) => {
    failed ??= { error };
    watch.fail(error);
  });
  res.write = function teedWrite(this: Response, ...args: unknown[]): boolean {
    if (!over && streamed === undefined) {
      // The first part of a streamed answer: its status and headers go out with it.
      const headers = flattenHeaders(res.getHeaders());
      streamed = execution.stream({ status: res.statusCode, headers });
      watch.endAtClose();
    }
    const chunk = chunkOf(args);
    if (!over && chunk !== undefined) streamed?.write(chunk);
    return (write as (...rest: unknown[]) => boolean).apply(this, args);
  } as Write;
  res.end = function heldEnd(this: Response, ...args: unknown[]): Response {
    if (over) return endAs(end, this, args);
    letThrough();
    // The watch already ended the claim (the client left, the response was destroyed): what is
    // ended now is nobody's answer to keep.
    if (!watch.settle()) return endAs(end, this, args);
    if (streamed !== undefined) {
      const chunk = chunkOf(args);
      if (chunk !== undefined) streamed.write(chunk);
      // Recorded before the client sees the end, so a retry sent after it is replayed.
      const ending = failed === undefined ? streamed.end() : streamed.fail(failed.error);
      ending.catch(() => undefined).then(() => endAs(end, res, args));
      return res;
    }
    const callback = args.find((arg) => typeof arg === 'function') as (() => void) | undefined;
    const bytes = chunkOf(args) ?? Buffer.alloc(0);
    const forward = () => endWith(end, res, bytes, callback);
    if (failed !== undefined) {
      execution.fail(failed.error).then(forward).catch(next);
      return res;
    }
    // Headers a handler flushed itself cannot be taken back: its answer goes out as it is.
    const answering: Port<Request, void> = {
      ...port,
      send: (answer) => (res.headersSent ? forward() : port.send(answer)),
    };
    const answer = capturedAnswer(res.statusCode, flattenHeaders(res.getHeaders()), bytes);
    layer.finish(answering, execution, answer, forward).catch(next);
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
function expressRequest(req: Request): ReadRequest {
  const { rawBody } = req as Request & { rawBody?: unknown };
  const raw = rawBody instanceof Uint8Array || typeof rawBody === 'string';
  if (!raw) warnOfParsedBody(req.body);
  return {
    method: req.method,
    path: req.baseUrl + req.path,
    headers: nodeHeaders(req.headers, req.rawHeaders),
    body: raw ? rawBody : req.body,
  };
}

// One request on Express; passing it on is `next()`, to the route's handler or the next route.
function expressPort(req: Request, res: Response, next: NextFunction): Port<Request, void> {
  const before = res.getHeaders();
  return {
    request: req,
    read: () => expressRequest(req),
    send: (answer) => sendAnswer(res, answer, before),
    pass: () => next(),
  };
}

/**
 * Express 5 middleware that makes a route idempotent with the `Idempotency-Key` header. Mount it
 * after the body parser (the body is part of the fingerprint) and before the route handler:
 *
 * - a new key runs the handler once; its answer is stored before it is sent; an answer written
 *   in parts (`res.write`, a piped stream, SSE) goes out as it is written and is teed, kept while
 *   it fits `maxStoredBytes` (see docs/http.md, "Streamed answers");
 * - a retry gets the stored answer with `Idempotent-Replayed: true`, without running the handler;
 * - every other outcome is an `application/problem+json` answer (an `IdempotencyProblem`), or
 *   `onError`'s;
 * - a handler that fails (a throw, a rejection, `next(err)`, or a status that is not stored)
 *   releases the key; what the app's error handler answers is sent, never stored (the error is
 *   heard on router's `express.router.request` tracing channel, router 2.3 and later); so does a
 *   response that closes unanswered after a failure (a stream that errored into
 *   `pipeline(stream, res)`, `res.destroy()`, an error once the headers were out);
 * - an answer that cannot be recorded (the store fails) gives a 500 `answer-not-recorded` and
 *   leaves the key pending, since the handler's effect happened (see `idempotent`).
 *
 * What is stored is what was sent: the status, the stored headers and the exact body bytes.
 * Replays and problems keep the headers set by middleware that ran before this one (CORS, a
 * request id). The body's bytes (`express.raw`, or `req.rawBody` as {@link keepRawBody} keeps
 * it beside `express.json`) or text (`express.text`) are fingerprinted as written; a body only
 * `express.json` parsed, as its canonical JSON (see `requestFingerprint`), with one process
 * warning (`IDEMPOTENCY_RAW_BODY_MISSING`) saying so.
 *
 * @param store - any {@link LeasedIdempotencyStore}, e.g. `openSqliteStore(path)`
 * @param options - see {@link ExpressIdempotencyOptions}
 * @example
 * ```ts
 * import express from 'express';
 * import { expressIdempotency, keepRawBody } from 'drizzle-idempotency/express';
 *
 * const app = express();
 * app.use(express.json({ verify: keepRawBody }));
 * // Who is calling, as the app's authentication established it.
 * const scope = (req: express.Request) => clientIdOf(req);
 * app.post('/payments', expressIdempotency(store, { scope }), (req, res) => {
 *   res.status(201).json(createPayment(req.body));
 * });
 * ```
 * @throws {@link InvalidOptionError} for a bad option, when called
 */
export function expressIdempotency(
  store: LeasedIdempotencyStore<unknown>,
  options: ExpressIdempotencyOptions,
): RequestHandler {
  const layer = adapterLayer(store, options);
  watchRouterErrors();
  return async function idempotencyMiddleware(req, res, next) {
    const port = expressPort(req, res, next);
    try {
      await layer.serve(port, (execution) => {
        capture(layer, port, res, next, execution);
        next();
      });
    } catch (error) {
      next(error);
    }
  };
}

/** Options of {@link expressTransaction}: those of {@link expressIdempotency}, plus `prepare`. */
export type ExpressTransactionOptions<P> = AdapterTransactionOptions<Request, P>;

/**
 * The transactional form for Express: a route handler whose database writes and stored answer
 * commit in **one** transaction, fenced by the key's fencing token, before the response leaves.
 * The key is claimed first in its own short commit, so a concurrent duplicate gets 409 at once.
 * The handler gets `req`, then `tx` and `prepared`, and **returns** its answer (an `HttpResponse`)
 * instead of writing to `res`: the answer has to be known inside the transaction that records it.
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
 * method outside `methods`, or no key when `required: false`) goes on with `next()`: to the next
 * route, and to Express's not found when there is none.
 *
 * @param runner - `sqliteTransaction`, `libsqlTransaction`, `pgTransaction` or
 *   `mysqlTransaction` over the store that keeps the keys
 * @param handler - runs inside the transaction, `tx` its only database access; `prepared` is
 *   what `prepare` returned
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
 *   expressTransaction(sqliteTransaction(store), (req, tx) => {
 *     const payment = tx.insert(payments).values(req.body).returning().get();
 *     return { status: 201, body: payment };
 *   }, { scope: (req) => clientIdOf(req) }),
 * );
 * ```
 * @throws {@link InvalidOptionError} for a bad option, when called
 */
export function expressTransaction<TX, P = undefined>(
  runner: TransactionRunner<TX>,
  handler: TransactionalHandler<Request, TX, P>,
  options: ExpressTransactionOptions<P>,
): RequestHandler {
  const layer = adapterLayer(runner.store, options);
  return async function idempotentTransaction(req, res, next) {
    try {
      await layer.transact(expressPort(req, res, next), runner, handler);
    } catch (error) {
      next(error);
    }
  };
}
