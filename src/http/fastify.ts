import { type Readable, Transform } from 'node:stream';
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { IdempotencyStore } from '../core/store.js';
import type { TransactionRunner } from '../core/transaction-runner.js';
import type { Execution } from './execution.js';
import { idempotent } from './idempotent.js';
import type { IdempotentOptions } from './options.js';
import type { IdempotencyProblem } from './problems.js';
import { type IdempotentRequest, nodeHeaders } from './request.js';
import { type HttpResponse, toWire } from './response.js';
import { transactDecision } from './transactional.js';

/** Options of {@link fastifyIdempotency}: the core's, plus Fastify-shaped hooks. */
export interface FastifyIdempotencyOptions extends IdempotentOptions {
  /** Who the key belongs to, e.g. the authenticated client; `undefined` for unscoped. */
  readonly scope?: (request: FastifyRequest) => string | undefined | Promise<string | undefined>;
  /**
   * The answer for a problem outcome instead of the default `application/problem+json` one: a
   * status, headers and a body (bytes, a JSON value, or a string with a non-JSON content type).
   */
  readonly onError?: (problem: IdempotencyProblem, request: FastifyRequest) => HttpResponse;
}

/**
 * The four route hooks of the layer. Spread them into a route's options, or add each with
 * `fastify.addHook(name, hook)` to cover every route of a plugin scope.
 */
export interface FastifyIdempotencyHooks {
  /**
   * Keeps the bytes of the request body as they arrive, for the fingerprint, and hands them on
   * to Fastify's parser unchanged. Without it the fingerprint sees only the parsed body.
   */
  readonly preParsing: (
    request: FastifyRequest,
    reply: FastifyReply,
    payload: Readable,
  ) => Promise<Readable>;
  /** Answers replays and problems before the handler runs, or reserves the key for it. */
  readonly preHandler: (request: FastifyRequest, reply: FastifyReply) => Promise<unknown>;
  /** Records the handler's answer before it is sent (or releases the key for a failure). */
  readonly onSend: (
    request: FastifyRequest,
    reply: FastifyReply,
    payload: unknown,
  ) => Promise<unknown>;
  /** Releases the key of a handler that threw, so a retry runs. */
  readonly onError: (request: FastifyRequest, reply: FastifyReply, error: Error) => Promise<void>;
}

function isReadable(payload: unknown): payload is Readable {
  return (
    typeof payload === 'object' &&
    payload !== null &&
    typeof (payload as { pipe?: unknown }).pipe === 'function' &&
    Symbol.asyncIterator in payload
  );
}

// The payload at onSend is what Fastify is about to write: a string (serialized JSON, text), a
// Buffer, a stream, or nothing.
async function payloadBytes(payload: unknown): Promise<Buffer> {
  if (payload === undefined || payload === null) return Buffer.alloc(0);
  if (typeof payload === 'string') return Buffer.from(payload, 'utf8');
  if (payload instanceof Uint8Array) return Buffer.from(payload);
  if (isReadable(payload)) {
    const chunks: Buffer[] = [];
    for await (const chunk of payload) {
      chunks.push(typeof chunk === 'string' ? Buffer.from(chunk, 'utf8') : Buffer.from(chunk));
    }
    return Buffer.concat(chunks);
  }
  return Buffer.from(String(payload), 'utf8');
}

function flattenHeaders(reply: FastifyReply): Record<string, string> {
  const headers: Record<string, string> = {};
  for (const [name, value] of Object.entries(reply.getHeaders())) {
    if (value !== undefined) {
      headers[name.toLowerCase()] = Array.isArray(value) ? value.join(', ') : String(value);
    }
  }
  return headers;
}

// Puts a response's status and headers on the reply and returns its body for the wire.
function applyResponse(reply: FastifyReply, response: HttpResponse): string | Buffer {
  const wire = toWire(response);
  reply.code(wire.status);
  for (const [name, value] of Object.entries(wire.headers)) reply.header(name, value);
  if (wire.body === undefined) return '';
  return typeof wire.body === 'string' ? wire.body : Buffer.from(wire.body);
}

// The body bytes `preParsing` saw, by request, until the layer has read them.
const rawBodies = new WeakMap<FastifyRequest, Buffer>();

// A pass-through stream that keeps a copy of what went through it. Fastify checks the length it
// read against Content-Length through `receivedEncodedLength`, so it is kept up as well.
function keepingBytes(request: FastifyRequest, payload: Readable): Readable {
  const chunks: Buffer[] = [];
  const kept = new Transform({
    transform(chunk: Buffer, _encoding, callback) {
      chunks.push(chunk);
      (kept as Transform & { receivedEncodedLength: number }).receivedEncodedLength += chunk.length;
      callback(null, chunk);
    },
    flush(callback) {
      rawBodies.set(request, Buffer.concat(chunks));
      callback();
    },
  });
  (kept as Transform & { receivedEncodedLength: number }).receivedEncodedLength = 0;
  payload.on('error', (error) => kept.destroy(error));
  return payload.pipe(kept);
}

// What the layer sees of a Fastify request: the path without its query string, every key header
// line, and the body as the client sent it when `preParsing` kept it.
async function idempotentRequest(
  request: FastifyRequest,
  options: FastifyIdempotencyOptions,
): Promise<IdempotentRequest> {
  const raw = rawBodies.get(request);
  rawBodies.delete(request);
  return {
    method: request.method,
    path: request.url.split('?', 1)[0] ?? '/',
    headers: nodeHeaders(request.headers, request.raw.rawHeaders),
    body: raw ?? request.body,
    scope: options.scope ? await options.scope(request) : undefined,
  };
}

/**
 * Fastify 5 hooks that make routes idempotent with the `Idempotency-Key` header:
 *
 * - a new key runs the handler once; its answer is stored before it is sent (`onSend`);
 * - a retry gets the stored answer with `Idempotent-Replayed: true`, without running the handler;
 * - every other outcome is an `application/problem+json` answer (or `onError`'s);
 * - a handler that throws (`onError` hook) or answers a status that is not stored releases the
 *   key, so a retry runs;
 * - an answer that cannot be recorded (the store fails) gives a 500 `answer-not-recorded` and
 *   leaves the key pending, since the handler's effect happened (see {@link idempotent}).
 *
 * The body is part of the fingerprint: `preParsing` keeps its bytes as Fastify reads them, so it
 * is fingerprinted as the client wrote it, and the decision waits for parsing (`preHandler`).
 * What is stored is what was sent: the status, the stored headers and the exact body bytes; a
 * streamed answer is read whole before it is stored.
 *
 * @param store - any {@link IdempotencyStore}, e.g. `openSqliteStore(path)`
 * @param options - see {@link FastifyIdempotencyOptions}
 * @example
 * ```ts
 * import Fastify from 'fastify';
 * import { fastifyIdempotency } from 'drizzle-idempotency/fastify';
 * import { openSqliteStore } from 'drizzle-idempotency/sqlite';
 *
 * const idempotency = fastifyIdempotency(openSqliteStore('./idempotency.db'));
 * const app = Fastify();
 * app.post('/payments', { ...idempotency }, async (request, reply) => {
 *   reply.code(201);
 *   return { id: crypto.randomUUID(), amount: (request.body as { amount: number }).amount };
 * });
 * ```
 * @throws {@link InvalidOptionError} for a bad option, when called
 */
export function fastifyIdempotency(
  store: IdempotencyStore<unknown>,
  options: FastifyIdempotencyOptions = {},
): FastifyIdempotencyHooks {
  const layer = idempotent(store, options);
  // Each request the layer let through, until its answer is recorded: its execution, and the
  // headers set before the handler ran (CORS, a request id), which a problem answer keeps.
  const running = new WeakMap<
    FastifyRequest,
    { readonly execution: Execution; readonly before: ReturnType<FastifyReply['getHeaders']> }
  >();

  function problemResponse(problem: IdempotencyProblem, request: FastifyRequest): HttpResponse {
    return options.onError ? options.onError(problem, request) : problem.toResponse();
  }

  return {
    async preParsing(request, _reply, payload) {
      return keepingBytes(request, payload);
    },

    async preHandler(request, reply) {
      const decision = await layer.begin(await idempotentRequest(request, options));
      if (decision.action === 'pass') return undefined;
      if (decision.action === 'run') {
        running.set(request, { execution: decision.execution, before: reply.getHeaders() });
        return undefined;
      }
      const { result } = decision;
      const response =
        result.outcome === 'problem' ? problemResponse(result.problem, request) : result.response;
      // Returning the reply tells Fastify the hook answered and the handler must not run.
      return reply.send(applyResponse(reply, response));
    },

    async onSend(request, reply, payload) {
      const owned = running.get(request);
      if (owned === undefined) return payload;
      running.delete(request);
      const { execution, before } = owned;
      const bytes = await payloadBytes(payload);
      // The bytes the handler sent are what is stored, never a re-parse of them.
      const result = await execution.complete({
        status: reply.statusCode,
        headers: flattenHeaders(reply),
        ...(bytes.byteLength === 0 ? {} : { body: bytes }),
      });
      if (result.outcome === 'problem') {
        // The handler's headers (its length among them) do not belong to the problem: only those
        // set before it ran stay, as on a problem answered before the handler.
        for (const name of Object.keys(reply.getHeaders())) reply.removeHeader(name);
        for (const [name, value] of Object.entries(before)) {
          if (value !== undefined) reply.header(name, value);
        }
        return applyResponse(reply, problemResponse(result.problem, request));
      }
      return bytes;
    },

    async onError(request, _reply, error) {
      const owned = running.get(request);
      if (owned === undefined) return;
      running.delete(request);
      await owned.execution.fail(error);
    },
  };
}

/** Options of {@link fastifyTransaction}: those of {@link fastifyIdempotency}, plus `prepare`. */
export interface FastifyTransactionOptions<P> extends FastifyIdempotencyOptions {
  /**
   * Asynchronous work after the key is claimed and before the transaction opens (a call to
   * another service, a slow computation); its result is the handler's second argument. It is
   * what lets a synchronous SQLite handler depend on an `await`. A throw releases the key. Its
   * effects are not in the transaction: make them idempotent on their own (pass the key on).
   */
  readonly prepare?: (request: FastifyRequest) => P | Promise<P>;
}

/** A Fastify request in a transactional route: `request.tx` is the open Drizzle transaction. */
export type TransactionalFastifyRequest<TX> = FastifyRequest & {
  /** The transaction the handler's writes go through; it also records the answer. */
  readonly tx: TX;
};

/** The route options {@link fastifyTransaction} returns: spread them into a route's options. */
export interface FastifyTransactionRoute {
  /** Keeps the request body's bytes for the fingerprint, as in {@link FastifyIdempotencyHooks}. */
  readonly preParsing: FastifyIdempotencyHooks['preParsing'];
  /** Claims the key, runs the handler in its transaction, and sends the recorded answer. */
  readonly handler: (request: FastifyRequest, reply: FastifyReply) => Promise<FastifyReply>;
}

/**
 * The transactional form for Fastify: a route whose database writes and stored answer commit in
 * **one** transaction, fenced by the key's attempt token, before the response leaves. The key is
 * claimed first in its own short commit, so a concurrent duplicate gets 409 at once. The handler
 * reads `request.tx` and **returns** its answer (an {@link HttpResponse}) instead of sending it:
 * the answer has to be known inside the transaction that records it.
 *
 * - a stored status commits the writes and the answer together (`executed`);
 * - a throw, or a status that is not stored (5xx by default), rolls the writes back and releases
 *   the key, so a retry runs cleanly; the error goes on to Fastify's error handler;
 * - if the key was taken over meanwhile (this request outlived its lease), the whole transaction
 *   rolls back and the request gets 409 `request-superseded`: nothing of it was written.
 *
 * Fastify parses the body before the route handler, so `request.body` is there even for a
 * synchronous SQLite handler (`sqliteTransaction(store)`: better-sqlite3 transactions cannot span
 * an `await`, and a handler returning a promise is rolled back and answered with 500). With
 * `pgTransaction(store)` the handler may be async. A request the layer does not cover (a method
 * outside `methods`, or no key when `required: false`) has no key to record its answer under: it
 * is answered as not found.
 *
 * @param runner - `sqliteTransaction`, `libsqlTransaction`, `pgTransaction` or
 *   `mysqlTransaction` over the store that keeps the keys
 * @param handler - runs inside the transaction, `request.tx` its only database access; its second
 *   argument is what `prepare` returned
 * @param options - see {@link FastifyTransactionOptions}
 * @returns route options holding the `handler`
 * @example
 * ```ts
 * import Fastify from 'fastify';
 * import { fastifyTransaction } from 'drizzle-idempotency/fastify';
 * import { openSqliteStore, sqliteTransaction } from 'drizzle-idempotency/sqlite';
 *
 * const store = openSqliteStore('./app.db');
 * const app = Fastify();
 * app.post(
 *   '/payments',
 *   fastifyTransaction(sqliteTransaction(store), (request) => {
 *     const payment = request.tx.insert(payments).values(request.body).returning().get();
 *     return { status: 201, body: payment };
 *   }),
 * );
 * ```
 * @throws {@link InvalidOptionError} for a bad option, when called
 */
export function fastifyTransaction<TX, P = undefined>(
  runner: TransactionRunner<TX>,
  handler: (
    request: TransactionalFastifyRequest<TX>,
    prepared: P,
  ) => HttpResponse | Promise<HttpResponse>,
  options: FastifyTransactionOptions<P> = {},
): FastifyTransactionRoute {
  const layer = idempotent(runner.store, options);
  return {
    async preParsing(request, _reply, payload) {
      return keepingBytes(request, payload);
    },

    async handler(request, reply) {
      const decision = await layer.begin(await idempotentRequest(request, options));
      if (decision.action === 'pass') {
        reply.callNotFound();
        return reply;
      }
      const { prepare } = options;
      const result = await transactDecision(
        decision,
        runner,
        prepare && (() => prepare(request)),
        (tx, prepared) =>
          handler(Object.assign(request, { tx }) as TransactionalFastifyRequest<TX>, prepared),
      );
      const response =
        result.outcome === 'problem'
          ? options.onError
            ? options.onError(result.problem, request)
            : result.problem.toResponse()
          : result.response;
      return reply.send(applyResponse(reply, response));
    },
  };
}
