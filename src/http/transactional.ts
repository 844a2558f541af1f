import type { TransactionRunner } from '../core/transaction-runner.js';
import type { Decision } from './idempotent.js';
import type { IdempotentResult } from './outcome.js';
import type { HttpResponse } from './response.js';

/**
 * What a transactional route answers once the layer decided to answer or to run: the decided
 * answer, or, with the key claimed, `prepare` (the asynchronous work that cannot go inside a
 * synchronous transaction) first, then `handler` in the runner's transaction. A throwing
 * `prepare` releases the key and rethrows, as a throwing handler does.
 */
export async function transactDecision<TX, P>(
  decision: Exclude<Decision, { readonly action: 'pass' }>,
  runner: TransactionRunner<TX>,
  prepare: (() => P | Promise<P>) | undefined,
  handler: (tx: TX, prepared: P) => HttpResponse | Promise<HttpResponse>,
): Promise<IdempotentResult> {
  if (decision.action === 'respond') return decision.result;
  const { execution } = decision;
  let prepared: P;
  try {
    prepared = (prepare ? await prepare() : undefined) as P;
  } catch (error) {
    await execution.fail(error);
    throw error;
  }
  return execution.transact(runner, (tx) => handler(tx, prepared));
}
