import type { IdempotencyProblem } from './problems.js';
import { toWire, type WireResponse } from './response.js';

/**
 * What happened to a request, one value per path through the layer.
 *
 * | outcome | the handler | the key |
 * |---|---|---|
 * | `executed` | ran once | its answer is stored (or only its size, past `maxStoredBytes`) |
 * | `replayed` | did not run | its stored answer was sent with `Idempotent-Replayed: true` |
 * | `notStored` | ran | its status is not stored (5xx by default), so the key was released |
 * | `passedThrough` | ran | no key and none required, or a method the layer does not cover |
 * | `problem` | did not run, or ran without its answer being recorded (the key then stays pending) | see `problem` |
 * | `failed` | threw | released, so a retry runs (reported to `onOutcome` only) |
 * | `outcomeUnknown` | threw `OutcomeUnknownError` | held unrecorded: retries get 409 `outcome-unknown` until an operator settles it (reported to `onOutcome` only) |
 * | `superseded` | ran past its lease | a retry took it over; this answer is not stored (reported to `onOutcome` only; the result is a `problem`) |
 */
export const Outcome = {
  executed: 'executed',
  replayed: 'replayed',
  notStored: 'notStored',
  passedThrough: 'passedThrough',
  problem: 'problem',
  failed: 'failed',
  outcomeUnknown: 'outcomeUnknown',
  superseded: 'superseded',
} as const;

/** One of the values of {@link Outcome}. */
export type Outcome = (typeof Outcome)[keyof typeof Outcome];

/**
 * The result of a request through the layer: its outcome and the response to send, already in its
 * wire form (lower-case header names, the body as the bytes that are sent, stored and replayed), so
 * an adapter sends it as it is.
 */
export type IdempotentResult =
  | {
      readonly outcome: 'executed' | 'replayed' | 'notStored' | 'passedThrough';
      readonly response: WireResponse;
    }
  | {
      readonly outcome: 'problem';
      readonly response: WireResponse;
      readonly problem: IdempotencyProblem;
    };

/**
 * What the `onOutcome` hook hears once per request the layer decided on: for logs, metrics and
 * traces. It is told after the outcome is final and before the answer is sent.
 */
export interface OutcomeEvent {
  /** What happened; see {@link Outcome}. */
  readonly outcome: Outcome;
  /** The request's method, as received. */
  readonly method: string;
  /** The request's path. */
  readonly path: string;
  /** The id the key is stored under (scope included), or `undefined` when there was no usable key. */
  readonly key: string | undefined;
  /** Whether the request had a scope (a tenant, a user) that its key is stored under. */
  readonly scoped: boolean;
  /** The status of the answer the layer gives, or `undefined` when the app answers (`passedThrough`, `failed`). */
  readonly status: number | undefined;
  /** The problem, for the `problem` outcome. */
  readonly problem?: IdempotencyProblem;
  /** What the handler threw, for the `failed` and `outcomeUnknown` outcomes. */
  readonly error?: unknown;
  /**
   * The fencing token of this run of the handler: it names this ownership
   * of the key (see `IdempotencyRecord.fencingToken`); it is not a count of runs.
   */
  readonly fencingToken?: number;
  /**
   * Whether this run took the key over from an owner whose lease lapsed
   * (the handler may have run before); `false` for a key claimed afresh.
   */
  readonly takenOver?: boolean;
  /** Milliseconds from the layer seeing the request to this outcome. */
  readonly durationMs: number;
}

/** The result of answering with a problem: its default response, on the wire. */
export function problemResult(problem: IdempotencyProblem): IdempotentResult {
  return { outcome: Outcome.problem, response: toWire(problem.toResponse()), problem };
}
