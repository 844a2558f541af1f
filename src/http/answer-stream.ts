import type { IdempotentResult } from './outcome.js';
import type { NotKept, NotKeptReason, WireResponse } from './response.js';

/**
 * A streamed answer whose status and headers went out, teed as it is sent: the client gets each
 * chunk as it comes, and a copy is kept while the whole answer fits. The moment it can no longer
 * be kept (it grows past `maxStoredBytes`, its first byte under `storeStreams: false`, or it is
 * still open after `streamRecordAfterSeconds`) its key is recorded as done without it, and the
 * rest is only passed on. Its first ending counts and every later call does nothing, so an
 * adapter may report what it sees (the stream's end, the client's leaving, a failure) without
 * ordering them.
 */
export interface AnswerStream {
  /**
   * A chunk as it is sent: kept while the answer fits; the chunk that takes it past the cap (or
   * the first one when streams are not kept) has its key recorded without it, in the background.
   */
  write(chunk: Uint8Array): void;
  /**
   * The stream ended and was sent whole: its key is recorded as done, with its bytes when they were
   * kept and only its size otherwise (a retry then gets 410 `answer-not-kept`). The result is
   * `undefined` when the key was already recorded or the stream ended another way; a recording
   * already under way is waited for, so a retry sent once the client sees the end finds it.
   */
  end(): Promise<IdempotentResult | undefined>;
  /**
   * The client left before the stream ended: the handler ran and its effect happened, so the key is
   * recorded as done without an answer, never released for a second run.
   */
  left(): Promise<void>;
  /**
   * The stream failed on the server's side: its key is released, so a retry runs. A key already
   * recorded without the answer stays recorded: its effect happened, and a retry gets 410.
   */
  fail(error: unknown): Promise<void>;
}

/** How a streamed answer ends its key: the {@link Execution}'s own steps. */
export interface StreamEnding {
  complete(response: WireResponse, notKept?: NotKept): Promise<IdempotentResult>;
  fail(error: unknown): Promise<void>;
}

/** What a teed answer needs of the layer's options. */
interface TeeSettings {
  readonly maxStoredBytes: number;
  readonly storeStreams: boolean;
  readonly streamRecordAfterMs: number;
}

class TeedAnswer implements AnswerStream {
  readonly #head: Omit<WireResponse, 'body'>;
  readonly #ending: StreamEnding;
  // How many bytes may be kept: -1 when streams are not kept at all.
  readonly #keepUpTo: number;
  // Whether the key is recorded as soon as the answer cannot be kept: only when its status is
  // stored; any other status releases the key at the stream's end.
  readonly #recordsEarly: boolean;
  #chunks: Uint8Array[] | undefined = [];
  #bytes = 0;
  #ended = false;
  // The recording of a key settled before the stream's end, for `end` to wait for.
  #recording: Promise<unknown> | undefined;
  #timer: ReturnType<typeof setTimeout> | undefined;

  constructor(
    head: Omit<WireResponse, 'body'>,
    ending: StreamEnding,
    keepUpTo: number,
    recordAfterMs: number | undefined,
  ) {
    this.#head = head;
    this.#ending = ending;
    this.#keepUpTo = keepUpTo;
    this.#recordsEarly = recordAfterMs !== undefined;
    if (keepUpTo < 0) this.#chunks = undefined;
    if (recordAfterMs !== undefined) {
      this.#timer = setTimeout(() => this.#recordUnkept('still-open'), recordAfterMs);
      // A stream's bound must never keep a process alive that has nothing else to do.
      this.#timer.unref();
    }
  }

  write(chunk: Uint8Array): void {
    if (this.#ended || chunk.byteLength === 0) return;
    this.#bytes += chunk.byteLength;
    if (this.#bytes > this.#keepUpTo) {
      this.#chunks = undefined;
      if (this.#recordsEarly) {
        this.#recordUnkept(this.#overReason());
        return;
      }
    }
    // A copy: the sender may reuse its buffer once the chunk is written.
    this.#chunks?.push(Uint8Array.from(chunk));
  }

  #settle(): boolean {
    if (this.#ended) return false;
    this.#ended = true;
    clearTimeout(this.#timer);
    return true;
  }

  // Why an answer past what may be kept is not kept.
  #overReason(): NotKeptReason {
    return this.#keepUpTo < 0 ? 'stream' : 'too-large';
  }

  #unkept(reason: NotKeptReason): NotKept {
    return { bytes: this.#bytes, reason };
  }

  // The answer can no longer be kept, and the stream goes on: its key is recorded now, as its end
  // would record it, so a retry gets 410 at once instead of 409 for as long as the stream runs,
  // and a process that dies mid-stream leaves a record instead of a lease that lapses into a
  // second run. From here on the stream is only passed on.
  #recordUnkept(reason: NotKeptReason): void {
    if (!this.#settle()) return;
    this.#chunks = undefined;
    this.#recording = this.#ending
      .complete({ ...this.#head, body: undefined }, this.#unkept(reason))
      .catch(() => undefined);
  }

  async end(): Promise<IdempotentResult | undefined> {
    if (!this.#settle()) {
      await this.#recording;
      return undefined;
    }
    const chunks = this.#chunks;
    if (chunks === undefined) {
      return this.#ending.complete(
        { ...this.#head, body: undefined },
        this.#unkept(this.#overReason()),
      );
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
 * `maxStoredBytes`, or never when `storeStreams` is `false` (it is then only counted). `stored`
 * says whether its status is stored: only then is its key recorded before the stream's end (past
 * the cap, at its first byte when streams are not kept, or after `streamRecordAfterMs`); a status
 * that is not stored releases its key at the end, as any answer does.
 */
export function teeAnswer(
  head: Omit<WireResponse, 'body'>,
  ending: StreamEnding,
  settings: TeeSettings,
  stored: boolean,
): AnswerStream {
  return new TeedAnswer(
    head,
    ending,
    settings.storeStreams ? settings.maxStoredBytes : -1,
    stored ? settings.streamRecordAfterMs : undefined,
  );
}
