import type { OutgoingHttpHeaders, ServerResponse } from 'node:http';
import { pipeline, type Readable, Transform } from 'node:stream';
import type { AnswerStream } from './answer-stream.js';
import type { Execution } from './execution.js';
import { capturedAnswer } from './port.js';
import { flattenHeaders, type WireResponse } from './response.js';

/**
 * The error a claim is ended with when a response a handler took over (Fastify's
 * `reply.hijack()`) closed before the handler ended it: nothing of it will reach the client.
 */
export class ResponseClosedError extends Error {
  constructor() {
    super('the response closed before the handler ended it');
    this.name = 'ResponseClosedError';
  }
}

/**
 * Ends the claim of a request whose response closed unanswered: releases its key (which stops
 * the heartbeat first). If the store fails too, the lease, no longer renewed, lapses and a retry
 * takes the key over; there is no client left to tell.
 */
export function abandonClaim(execution: Execution, error: unknown): void {
  execution.fail(error).catch(() => undefined);
}

/** How a watched response closed while its claim was still open. */
export interface ResponseClosed {
  /** Whether the whole response was handed to the connection (`writableFinished`). */
  readonly finished: boolean;
  /** The failure the process saw (a `destroy`, an error that left the handler), if any. */
  readonly failure: { readonly error: unknown } | undefined;
}

/**
 * The watch over one Node response while the layer holds its key: it hears of the response's
 * close and of every `destroy`, so that a handler that fails without ending its response (a
 * stream that errors into `pipeline(stream, res)`, `res.destroy()`, an error after its headers
 * went out) still ends its claim instead of leaving the key pending under a live heartbeat.
 */
export interface NodeResponseWatch {
  /** An error left the handler: once the response is closed without the layer's answer, the claim ends. */
  fail(error: unknown): void;
  /**
   * The handler took the response over (a hijacked reply): from now on its close ends the claim
   * even when the process saw no failure, since nothing else will.
   */
  endAtClose(): void;
  /**
   * The layer takes the ending over (it has the handler's answer, or its error): `true` once, and
   * `false` when the watch already ended the claim, so it is never ended twice.
   */
  settle(): boolean;
}

/**
 * Watches `res` until {@link NodeResponseWatch.settle}: once the response closes without the
 * layer's answer and the process saw a failure there (or {@link NodeResponseWatch.endAtClose}
 * was called), `closed` is called, once, and the watch is settled. A client that leaves while
 * the handler still runs is no failure of the process: the handler may still end the response,
 * and its answer is recorded then, as before.
 */
export function watchNodeResponse(
  res: ServerResponse,
  closed: (how: ResponseClosed) => void,
): NodeResponseWatch {
  let settled = false;
  let isClosed = res.closed;
  let atClose = false;
  let failure: { readonly error: unknown } | undefined;
  const check = () => {
    if (settled || !isClosed || (failure === undefined && !atClose)) return;
    settled = true;
    closed({ finished: res.writableFinished, failure });
  };
  const destroy = res.destroy;
  // `pipeline` destroys the response when its source errors, and a handler may do so itself;
  // either way this process ended the response, and it will never be answered.
  res.destroy = function watchedDestroy(this: ServerResponse, error?: Error) {
    failure ??= { error: error ?? new ResponseClosedError() };
    const result = destroy.call(this, error);
    check();
    return result;
  };
  res.once('close', () => {
    isClosed = true;
    check();
  });
  return {
    fail(error) {
      failure ??= { error };
      check();
    },
    endAtClose() {
      atClose = true;
      check();
    },
    settle() {
      if (settled) return false;
      settled = true;
      return true;
    },
  };
}

// Header lines as `writeHead` takes them: an object, or a flat array of names and values.
function headerLines(headers: unknown): Record<string, string> {
  if (Array.isArray(headers)) {
    const lines: Record<string, string> = {};
    for (let i = 0; i + 1 < headers.length; i += 2) {
      lines[String(headers[i]).toLowerCase()] = String(headers[i + 1]);
    }
    return lines;
  }
  if (typeof headers === 'object' && headers !== null) {
    return flattenHeaders(headers as OutgoingHttpHeaders);
  }
  return {};
}

/**
 * Copies what a handler writes straight to `res` (a hijacked reply) while letting it through:
 * returns the answer written so far, its status, its headers (those of `writeHead` too, which Node
 * does not keep where `getHeaders()` reads) and its exact bytes, to record once it is complete.
 */
export function copyNodeResponse(res: ServerResponse): () => WireResponse {
  const chunks: Buffer[] = [];
  let written: Record<string, string> = {};
  const keep = (chunk: unknown, encoding: unknown) => {
    if (typeof chunk === 'string') {
      chunks.push(
        Buffer.from(chunk, typeof encoding === 'string' ? (encoding as BufferEncoding) : 'utf8'),
      );
    } else if (chunk instanceof Uint8Array) {
      chunks.push(Buffer.from(chunk));
    }
  };
  const { writeHead, write, end } = res;
  res.writeHead = function copiedWriteHead(this: ServerResponse, ...args: unknown[]) {
    written = headerLines(args.find((arg) => typeof arg === 'object' && arg !== null));
    return (writeHead as (...rest: unknown[]) => ServerResponse).apply(this, args);
  } as ServerResponse['writeHead'];
  res.write = function copiedWrite(this: ServerResponse, ...args: unknown[]) {
    keep(args[0], args[1]);
    return (write as (...rest: unknown[]) => boolean).apply(this, args);
  } as ServerResponse['write'];
  res.end = function copiedEnd(this: ServerResponse, ...args: unknown[]) {
    if (typeof args[0] !== 'function') keep(args[0], args[1]);
    return (end as (...rest: unknown[]) => ServerResponse).apply(this, args);
  } as ServerResponse['end'];
  return () =>
    capturedAnswer(
      res.statusCode,
      { ...flattenHeaders(res.getHeaders()), ...written },
      Buffer.concat(chunks),
    );
}

/**
 * A stream a framework sends (Fastify's `reply.send(stream)`, Nest's `StreamableFile`), teed as it
 * is sent: the stream handed to the framework in its place passes every chunk on as it comes. Its
 * end is recorded before the framework ends the response, so a retry sent after the end is
 * replayed; its source's failure releases the key; a client that leaves first (`res` closes
 * unfinished) has it recorded without its answer.
 */
export function teedNodeStream(
  source: Readable,
  res: ServerResponse,
  streamed: AnswerStream,
): Readable {
  const teed = new Transform({
    transform(chunk: Buffer | string, _encoding, callback) {
      streamed.write(typeof chunk === 'string' ? Buffer.from(chunk, 'utf8') : chunk);
      callback(null, chunk);
    },
    flush(callback) {
      streamed
        .end()
        .catch(() => undefined)
        .then(() => callback());
    },
  });
  res.once('close', () => {
    if (!res.writableFinished) streamed.left().catch(() => undefined);
  });
  pipeline(source, teed, (error) => {
    if (error) streamed.fail(error).catch(() => undefined);
  });
  return teed;
}
