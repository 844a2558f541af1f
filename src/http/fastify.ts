import { type Readable, Transform } from 'node:stream';
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { LeasedIdempotencyStore } from '../core/store.js';
import type { TransactionRunner } from '../core/transaction-runner.js';
import type { Execution } from './execution.js';
import {
  abandonClaim,
  copyNodeResponse,
  type NodeResponseWatch,
  ResponseClosedError,
  watchNodeResponse,
} from './node-response.js';
import {
  type AdapterOptions,
  type AdapterTransactionOptions,
  adapterLayer,
  capturedAnswer,
  type Port,
  type ReadRequest,
  releasingOnThrow,
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

/** Options of {@link fastifyIdempotency}: the layer's, `scope` and `onError` given the request. */
export type FastifyIdempotencyOptions = AdapterOptions<FastifyRequest>;

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

// Puts an answer of the layer on the reply, with the headers of `answerHeaders` (a handler's,
// its length among them, do not belong to it), and returns its body for the wire.
function applyAnswer(
  reply: FastifyReply,
  answer: WireResponse,
  before: OutgoingHeaders,
): string | Buffer {
  for (const name of Object.keys(reply.getHeaders())) reply.removeHeader(name);
  for (const [name, value] of Object.entries(answerHeaders(before, answer))) {
    reply.header(name, value);
  }
  reply.code(answer.status);
  return answer.body === undefined ? '' : Buffer.from(answer.body);
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
function fastifyRequest(request: FastifyRequest): ReadRequest {
  const raw = rawBodies.get(request);
  rawBodies.delete(request);
  return {
    method: request.method,
    path: request.url.split('?', 1)[0] ?? '/',
    headers: nodeHeaders(request.headers, request.raw.rawHeaders),
    body: raw ?? request.body,
  };
}

// One request on Fastify: `deliver` hands an answer's body to Fastify (`reply.send` from a hook
// or a handler, the payload itself from `onSend`); `pass` is what the route does without the layer.
function fastifyPort<Sent>(
  request: FastifyRequest,
  reply: FastifyReply,
  before: OutgoingHeaders,
  deliver: (body: string | Buffer) => Sent,
  pass: () => Sent,
): Port<FastifyRequest, Sent> {
  return {
    request,
    read: () => fastifyRequest(request),
    send: (answer) => deliver(applyAnswer(reply, answer, before)),
    pass,
  };
}

/**
 * Fastify 5 hooks that make routes idempotent with the `Idempotency-Key` header:
 *
 * - a new key runs the handler once; its answer is stored before it is sent (`onSend`);
 * - a retry gets the stored answer with `Idempotent-Replayed: true`, without running the handler;
 * - every other outcome is an `application/problem+json` answer (or `onError`'s);
 * - a handler that throws (`onError` hook) or answers a status that is not stored releases the
 *   key, so a retry runs; so do a streamed answer that errors and a reply destroyed unsent;
 * - a reply taken over with `reply.hijack()` and written to `reply.raw` is copied as it goes out:
 *   recorded (and replayed) when the handler ended it completely, its key released otherwise;
 * - an answer that cannot be recorded (the store fails) gives a 500 `answer-not-recorded` and
 *   leaves the key pending, since the handler's effect happened (see `idempotent`).
 *
 * The body is part of the fingerprint: `preParsing` keeps its bytes as Fastify reads them, so it
 * is fingerprinted as the client wrote it, and the decision waits for parsing (`preHandler`).
 * What is stored is what was sent: the status, the stored headers and the exact body bytes; a
 * streamed answer is read whole before it is stored.
 *
 * @param store - any {@link LeasedIdempotencyStore}, e.g. `openSqliteStore(path)`
 * @param options - see {@link FastifyIdempotencyOptions}
 * @example
 * ```ts
 * import Fastify from 'fastify';
 * import { fastifyIdempotency } from 'drizzle-idempotency/fastify';
 * import { openSqliteStore } from 'drizzle-idempotency/sqlite';
 *
 * const idempotency = fastifyIdempotency(openSqliteStore('./idempotency.db'), {
 *   scope: (request) => clientIdOf(request),
 * });
 * const app = Fastify();
 * app.post('/payments', { ...idempotency }, async (request, reply) => {
 *   reply.code(201);
 *   return { id: crypto.randomUUID(), amount: (request.body as { amount: number }).amount };
 * });
 * ```
 * @throws {@link InvalidOptionError} for a bad option, when called
 */
export function fastifyIdempotency(
  store: LeasedIdempotencyStore<unknown>,
  options: FastifyIdempotencyOptions,
): FastifyIdempotencyHooks {
  const layer = adapterLayer(store, options);
  // Each request the layer let through, until its answer is recorded: its execution, and the
  // headers set before the handler ran (CORS, a request id), which a problem answer keeps.
  const running = new WeakMap<
    FastifyRequest,
    {
      readonly execution: Execution;
      readonly before: OutgoingHeaders;
      readonly watch: NodeResponseWatch;
    }
  >();

  return {
    async preParsing(request, _reply, payload) {
      return keepingBytes(request, payload);
    },

    async preHandler(request, reply) {
      const before = reply.getHeaders();
      // Returning the reply tells Fastify the hook answered and the handler must not run.
      const port = fastifyPort<FastifyReply | undefined>(
        request,
        reply,
        before,
        (body) => reply.send(body),
        () => undefined,
      );
      return layer.serve(port, (execution) => {
        const { raw } = reply;
        let copy: (() => WireResponse) | undefined;
        // A reply never sent through Fastify (destroyed, or hijacked and written to `reply.raw`)
        // reaches neither onSend nor onError: its claim ends when its response closes.
        const watch = watchNodeResponse(raw, ({ finished, failure }) => {
          running.delete(request);
          if (finished && copy !== undefined) {
            // The client got the whole hijacked answer: it is recorded, and a retry replays it.
            // A problem recording it is reported; there is no client left to answer.
            execution.complete(copy()).catch(() => undefined);
          } else {
            abandonClaim(execution, failure?.error ?? new ResponseClosedError());
          }
        });
        const hijack = reply.hijack;
        reply.hijack = function hijacked(this: FastifyReply) {
          copy ??= copyNodeResponse(raw);
          watch.endAtClose();
          return hijack.call(this);
        };
        running.set(request, { execution, before, watch });
        return undefined;
      });
    },

    async onSend(request, reply, payload) {
      const owned = running.get(request);
      if (owned === undefined) return payload;
      running.delete(request);
      if (!owned.watch.settle()) return payload;
      // A streamed answer that errors is the handler's failure: its key is released.
      const bytes = await releasingOnThrow(owned.execution, () => payloadBytes(payload));
      const kept = () => bytes;
      const port = fastifyPort<string | Buffer>(request, reply, owned.before, (body) => body, kept);
      const answer = capturedAnswer(reply.statusCode, flattenHeaders(reply.getHeaders()), bytes);
      return layer.finish(port, owned.execution, answer, kept);
    },

    async onError(request, _reply, error) {
      const owned = running.get(request);
      if (owned === undefined) return;
      running.delete(request);
      if (owned.watch.settle()) await owned.execution.fail(error);
    },
  };
}

/** Options of {@link fastifyTransaction}: those of {@link fastifyIdempotency}, plus `prepare`. */
export type FastifyTransactionOptions<P> = AdapterTransactionOptions<FastifyRequest, P>;

/** The route options {@link fastifyTransaction} returns: spread them into a route's options. */
export interface FastifyTransactionRoute {
  /** Keeps the request body's bytes for the fingerprint, as in {@link FastifyIdempotencyHooks}. */
  readonly preParsing: FastifyIdempotencyHooks['preParsing'];
  /** Claims the key, runs the handler in its transaction, and sends the recorded answer. */
  readonly handler: (request: FastifyRequest, reply: FastifyReply) => Promise<FastifyReply>;
}

/**
 * The transactional form for Fastify: a route whose database writes and stored answer commit in
 * **one** transaction, fenced by the key's fencing token, before the response leaves. The key is
 * claimed first in its own short commit, so a concurrent duplicate gets 409 at once. The handler
 * gets the request, then `tx` and `prepared`, and **returns** its answer (an `HttpResponse`)
 * instead of sending it: the answer has to be known inside the transaction that records it.
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
 * outside `methods`, or no key when `required: false`) has no key to record its answer under, and
 * Fastify has no next route: it gets the app's not-found answer (`reply.callNotFound()`).
 *
 * @param runner - `sqliteTransaction`, `libsqlTransaction`, `pgTransaction` or
 *   `mysqlTransaction` over the store that keeps the keys
 * @param handler - runs inside the transaction, `tx` its only database access; `prepared` is
 *   what `prepare` returned
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
 *   fastifyTransaction(sqliteTransaction(store), (request, tx) => {
 *     const payment = tx.insert(payments).values(request.body).returning().get();
 *     return { status: 201, body: payment };
 *   }, { scope: (request) => clientIdOf(request) }),
 * );
 * ```
 * @throws {@link InvalidOptionError} for a bad option, when called
 */
export function fastifyTransaction<TX, P = undefined>(
  runner: TransactionRunner<TX>,
  handler: TransactionalHandler<FastifyRequest, TX, P>,
  options: FastifyTransactionOptions<P>,
): FastifyTransactionRoute {
  const layer = adapterLayer(runner.store, options);
  return {
    async preParsing(request, _reply, payload) {
      return keepingBytes(request, payload);
    },

    handler(request, reply) {
      // Fastify has no next route: a request the layer does not cover is not found.
      const port = fastifyPort(
        request,
        reply,
        reply.getHeaders(),
        (body) => reply.send(body),
        () => {
          reply.callNotFound();
          return reply;
        },
      );
      return layer.transact(port, runner, handler);
    },
  };
}
