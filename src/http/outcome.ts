import type { IdempotencyProblem } from './problems.js';
import type { HttpResponse } from './response.js';

/**
 * What happened to a request, one value per path through the layer.
 *
 * | outcome | the handler | the key |
 * |---|---|---|
 * | `executed` | ran once | its answer is stored |
 * | `replayed` | did not run | its stored answer was sent with `Idempotent-Replayed: true` |
 * | `notStored` | ran | its status is not stored (5xx by default), so the key was released |
 * | `passedThrough` | ran | no key and none required, or a method the layer does not cover |
 * | `problem` | did not run, or ran without its answer being recorded (the key then stays pending) | see `problem` |
 */
export const Outcome = {
  executed: 'executed',
  replayed: 'replayed',
  notStored: 'notStored',
  passedThrough: 'passedThrough',
  problem: 'problem',
} as const;

/** One of the values of {@link Outcome}. */
export type Outcome = (typeof Outcome)[keyof typeof Outcome];

/** The result of a request through the layer: its outcome and the response to send. */
export type IdempotentResult =
  | {
      readonly outcome: 'executed' | 'replayed' | 'notStored' | 'passedThrough';
      readonly response: HttpResponse;
    }
  | {
      readonly outcome: 'problem';
      readonly response: HttpResponse;
      readonly problem: IdempotencyProblem;
    };

/** The result of answering with a problem: its default response. */
export function problemResult(problem: IdempotencyProblem): IdempotentResult {
  return { outcome: Outcome.problem, response: problem.toResponse(), problem };
}
