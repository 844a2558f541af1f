import type { IdempotentResult } from './outcome.js';
import type { NotKept, NotKeptReason, WireResponse } from './response.js';

/**
 * A streamed answer whose status and headers went out, teed as it is sent: the client gets each
 * chunk as it comes, and a copy is kept while the whole answer fits. Its first ending counts and
 * every later call does nothing, so an adapter may report what it sees (the stream's end, the
 * client's leaving, a failure) without ordering them.
 */
export interface AnswerStream {
  /** A chunk as it is sent: kept while the answer fits, only counted past that. */
  write(chunk: Uint8Array): void;
  /**
   * The stream ended and was sent whole: its key is recorded as done, with its bytes when they were
   * kept and only its size otherwise (a retry then gets 410 `answer-not-kept`). The result is
   * `undefined` when the stream had already ended another way.
   */
  end(): Promise<IdempotentResult | undefined>;
  /**
   * The client left before the stream ended: the handler ran and its effect happened, so the key is
   * recorded as done without an answer, never released for a second run.
   */
  left(): Promise<void>;
  /** The stream failed on the server's side: its key is released, so a retry runs. */
  fail(error: unknown): Promise<void>;
}

/** How a streamed answer ends its key: the {@link Execution}'s own steps. */
export interface StreamEnding {
  complete(response: WireResponse, notKept?: NotKept): Promise<IdempotentResult>;
  fail(error: unknown): Promise<void>;
}

class TeedAnswer implements AnswerStream {
  readonly #head: Omit<WireResponse, 'body'>;
  readonly #ending: StreamEnding;
  // How many bytes may be kept: -1 when streams are not kept at all.
  readonly #keepUpTo: number;
  #chunks: Uint8Array[] | undefined = [];
  #bytes = 0;
  #ended = false;

  constructor(head: Omit<WireResponse, 'body'>, ending: StreamEnding, keepUpTo: number) {
    this.#head = head;
    this.#ending = ending;
    this.#keepUpTo = keepUpTo;
    if (keepUpTo < 0) this.#chunks = undefined;
  }

  write(chunk: Uint8Array): void {
    if (this.#ended || chunk.byteLength === 0) return;
    this.#bytes += chunk.byteLength;
    if (this.#bytes > this.#keepUpTo) this.#chunks = undefined;
    // A copy: the sender may reuse its buffer once the chunk is written.
    this.#chunks?.push(Uint8Array.from(chunk));
  }

  #settle(): boolean {
    if (this.#ended) return false;
    this.#ended = true;
    return true;
  }

  #unkept(reason: NotKeptReason): NotKept {
    return { bytes: this.#bytes, reason };
  }

  async end(): Promise<IdempotentResult | undefined> {
    if (!this.#settle()) return undefined;
    const chunks = this.#chunks;
    if (chunks === undefined) {
      const reason = this.#keepUpTo < 0 ? 'stream' : 'too-large';
      return this.#ending.complete({ ...this.#head, body: undefined }, this.#unkept(reason));
    }
    const body = Buffer.concat(chunks);
    return this.#ending.complete({
      ...this.#head,
      body: body.byteLength === 0 ? undefined : body,
    });
  }

  async left(): Promise<void> {
    if (!this.#settle()) return;
    this.#chunks = undefined;
    await this.#ending.complete({ ...this.#head, body: undefined }, this.#unkept('unfinished'));
  }

  async fail(error: unknown): Promise<void> {
    if (!this.#settle()) return;
    this.#chunks = undefined;
    // No client is left to answer: a store that fails too lets the lease lapse.
    await this.#ending.fail(error).catch(() => undefined);
  }
}

/**
 * The {@link AnswerStream} of a streamed answer with this status and these headers: kept up to
 * `maxStoredBytes`, or never when `storeStreams` is `false` (it is then only counted).
 */
export function teeAnswer(
  head: Omit<WireResponse, 'body'>,
  ending: StreamEnding,
  settings: { readonly maxStoredBytes: number; readonly storeStreams: boolean },
): AnswerStream {
  return new TeedAnswer(head, ending, settings.storeStreams ? settings.maxStoredBytes : -1);
}
