import type { ReadRequest } from './port.js';
import { capturedAnswer } from './port.js';
import type { WireResponse } from './response.js';

const BODYLESS_METHODS = new Set(['GET', 'HEAD']);

/**
 * What the layer reads of a Fetch API request: the path as it was sent (the fingerprint
 * normalises every adapter's path one way), every header, and the body's bytes, never decoded
 * as text (which would make every invalid UTF-8 sequence one replacement character). `bytes`
 * reads the body so the handler can still read it: from a clone, or from the framework's cache.
 */
export async function webRequest(
  request: Request,
  headers: Readonly<Record<string, string>>,
  bytes: () => Promise<ArrayBuffer>,
): Promise<ReadRequest> {
  const { method } = request;
  const body =
    BODYLESS_METHODS.has(method.toUpperCase()) || request.body === null
      ? undefined
      : new Uint8Array(await bytes());
  return {
    method,
    path: new URL(request.url).pathname,
    headers,
    body: body === undefined || body.byteLength === 0 ? undefined : body,
  };
}

/** An answer of the layer as a Fetch API `Response`. */
export function webResponse(answer: WireResponse): Response {
  return new Response(answer.body ?? null, { status: answer.status, headers: answer.headers });
}

/** A handler's `Response`, read whole: the answer to record, and a copy of it to send on. */
export interface WebAnswer {
  /** The status, headers and exact bytes, to record. */
  readonly answer: WireResponse;
  /** The handler's own response again (its status text and repeated headers too), to send. */
  copy(): Response;
}

/** Reads a handler's `Response` whole, so a streamed answer is held until it ends. */
export async function webAnswer(response: Response): Promise<WebAnswer> {
  const bytes = new Uint8Array(await response.arrayBuffer());
  const { status, statusText, headers } = response;
  return {
    answer: capturedAnswer(status, Object.fromEntries(headers), bytes),
    copy: () =>
      new Response(bytes.byteLength === 0 ? null : bytes, { status, statusText, headers }),
  };
}
