import type { AnswerStream } from './answer-stream.js';
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

/**
 * A handler's `Response` as the layer sees it: read whole when its body was all there, to record
 * before it is sent; or still coming (a stream, SSE), to send as it comes and tee.
 */
export type WebAnswer =
  | {
      readonly whole: true;
      /** The status, headers and exact bytes, to record. */
      readonly answer: WireResponse;
      /** The handler's own response again (its status text and repeated headers too), to send. */
      copy(): Response;
    }
  | {
      readonly whole: false;
      /** The status and headers, which go out before the body is known. */
      readonly head: Omit<WireResponse, 'body'>;
      /** The handler's response, its body passed on chunk by chunk through `streamed`. */
      teed(streamed: AnswerStream): Response;
    };

const STILL_COMING = Symbol('still coming');

// Settles once the tasks queued so far have run: a body that is all there (a string, bytes, a
// stream enqueued at once) has its next chunk by then; one still being produced does not.
function afterQueuedTasks(): { readonly passed: Promise<typeof STILL_COMING>; cancel(): void } {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const passed = new Promise<typeof STILL_COMING>((resolve) => {
    timer = setTimeout(() => resolve(STILL_COMING), 0);
  });
  return { passed, cancel: () => clearTimeout(timer) };
}

type Read = Awaited<ReturnType<ReadableStreamDefaultReader<Uint8Array>['read']>>;

// The rest of a body still coming, passed on as it comes: `first` is the read in flight, `held`
// what was read before it. The body's end is recorded before the client sees it end, so a retry
// sent after the end is replayed; a failure releases the key before the connection is cut.
function teedBody(
  reader: ReadableStreamDefaultReader<Uint8Array>,
  held: readonly Uint8Array[],
  first: Promise<Read>,
  streamed: AnswerStream,
): ReadableStream<Uint8Array> {
  let next: Promise<Read> | undefined = first;
  return new ReadableStream<Uint8Array>({
    start(controller) {
      for (const chunk of held) {
        streamed.write(chunk);
        controller.enqueue(chunk);
      }
    },
    async pull(controller) {
      let read: Read;
      try {
        read = await (next ?? reader.read());
        next = undefined;
      } catch (error) {
        await streamed.fail(error);
        controller.error(error);
        return;
      }
      if (read.done) {
        await streamed.end();
        controller.close();
        return;
      }
      streamed.write(read.value);
      controller.enqueue(read.value);
    },
    async cancel(reason) {
      await streamed.left();
      await reader.cancel(reason).catch(() => undefined);
    },
  });
}

/**
 * Reads a handler's `Response`: whole when its body is all there once the tasks queued so far
 * have run, otherwise as a stream still coming, whose chunks read so far are passed on first.
 */
export async function webAnswer(response: Response): Promise<WebAnswer> {
  const { status, statusText, headers } = response;
  const chunks: Uint8Array[] = [];
  const reader = response.body?.getReader();
  while (reader !== undefined) {
    const next = reader.read();
    const wait = afterQueuedTasks();
    const read = await Promise.race([next, wait.passed]).finally(wait.cancel);
    if (read === STILL_COMING) {
      return {
        whole: false,
        head: { status, headers: Object.fromEntries(headers) },
        teed: (streamed) =>
          new Response(teedBody(reader, chunks, next, streamed), { status, statusText, headers }),
      };
    }
    if (read.done) break;
    chunks.push(read.value);
  }
  const bytes = Buffer.concat(chunks);
  return {
    whole: true,
    answer: capturedAnswer(status, Object.fromEntries(headers), bytes),
    copy: () =>
      new Response(bytes.byteLength === 0 ? null : bytes, { status, statusText, headers }),
  };
}
