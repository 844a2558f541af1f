import type { IdempotentResult } from '../../src/http/index.js';
import { answerOfSize, type JsonObject } from './inputs.js';
import { check } from './measure.js';

/** The stored answer every replay benchmark finishes its keys with: about 1 KB of JSON. */
export const REPLAY_ANSWER: JsonObject = answerOfSize(1024, 1);

/** The body of every request the layer replays. */
const BODY = { amount: 4200, currency: 'EUR', customer: 'cus_123', items: [{ sku: 'a', qty: 2 }] };

/** A POST with `key` as its idempotency key, as an adapter hands it to the layer. */
export function replayRequest(key: string) {
  return {
    method: 'POST',
    path: '/charges',
    headers: { 'idempotency-key': `"${key}"` },
    body: BODY,
  };
}

/** The handler behind the layer: answers {@link REPLAY_ANSWER} with 201. */
export function replayHandler() {
  return { status: 201, body: REPLAY_ANSWER };
}

/** The handler of a request that must be replayed: running it fails the benchmark. */
export function mustNotRun(): never {
  throw new Error('benchmark side did nothing: the replay ran the handler');
}

const ANSWER_BYTES = Buffer.from(JSON.stringify(REPLAY_ANSWER));

/** Checks that the layer replayed the stored answer's bytes. */
export function checkLayerReplay(result: IdempotentResult): void {
  const body = result.response.body;
  check(
    result.outcome === 'replayed' && body instanceof Uint8Array && ANSWER_BYTES.equals(body),
    'layer replay',
  );
}

/** Checks that a stored answer read back (by the store or by hand) is {@link REPLAY_ANSWER}. */
export function checkAnswer(response: unknown, what: string): void {
  check((response as { id?: unknown } | null | undefined)?.id === REPLAY_ANSWER.id, what);
}
