import { InvalidOptionError } from '../core/errors.js';
import type { Step } from '../core/steps.js';

// The step function of each request the layer runs a handler for, by the framework's request
// object: held weakly, so it goes with the request.
const stepsOfRequests = new WeakMap<object, Step<unknown>>();

/**
 * Hands `step` to the handler of `request` (the framework's request object, as the adapter's port
 * names it), for {@link idempotencyStep} to find.
 */
export function attachStep(request: object, step: Step<unknown>): void {
  stepsOfRequests.set(request, step);
}

/**
 * The step function of a request the idempotency layer runs a handler for, on a route whose layer
 * has the `steps` option (`sqliteSteps(store, { secret })`, `pgSteps`, `mysqlSteps`): the same
 * `step(name, fn)`, `step.tx` and `step.key` as `makeIdempotent`'s stepped form, recorded under the
 * request's key and fenced by its owner's token, so a retry that takes the key over after a crash
 * gets the recorded results without running them again (see docs/steps.md).
 *
 * `request` is what the framework hands the handler: Express's `req`, Fastify's `request`, Hono's
 * context `c`, the Fetch handler's `Request`, Nest's request (or use `@IdempotencyStep()`).
 *
 * @typeParam TX - the drizzle transaction of `step.tx`: the step log's (`SqliteHandlerTransaction`,
 *   `PgHandlerTransaction`, `MysqlHandlerTransaction`)
 * @param request - the framework's request of the running handler
 * @throws {@link InvalidOptionError} when the layer did not run this request's handler with steps
 *   (no `steps` option, or a request it let through without a key)
 * @example
 * ```ts
 * import express from 'express';
 * import { expressIdempotency, idempotencyStep } from 'drizzle-idempotency/express';
 * import { sqliteSteps } from 'drizzle-idempotency/sqlite';
 *
 * const app = express();
 * const steps = sqliteSteps(store, { secret: 'at least 16 bytes of secret' });
 * app.post('/payments', expressIdempotency(store, { scope: 'global', steps }), async (req, res) => {
 *   const step = idempotencyStep(req);
 *   const receipt = await step('charge', () => charge());
 *   res.status(201).json({ receipt });
 * });
 * ```
 */
export function idempotencyStep<TX = unknown>(request: object): Step<TX> {
  const step = stepsOfRequests.get(request);
  if (step === undefined) {
    throw new InvalidOptionError(
      'no step function for this request: the idempotency layer hands one only to the handler of a request it claimed a key for, with the `steps` option',
    );
  }
  return step as Step<TX>;
}
