import type { TransactionRunner } from '../function/transaction.js';
import type { Execution } from './execution.js';
import type { IdempotentResult } from './outcome.js';
import type { HttpResponse } from './response.js';

/**
 * Runs a transactional route once its key is claimed: `prepare` (the asynchronous work that
 * cannot go inside a synchronous transaction) first, then `handler` in the runner's transaction.
 * A throwing `prepare` releases the key and rethrows, as a throwing handler does.
 */
export async function prepareAndTransact<TX, P>(
  execution: Execution,
  runner: TransactionRunner<TX>,
  prepare: (() => P | Promise<P>) | undefined,
  handler: (tx: TX, prepared: P) => HttpResponse | Promise<HttpResponse>,
): Promise<IdempotentResult> {
  let prepared: P;
  try {
    prepared = (prepare ? await prepare() : undefined) as P;
  } catch (error) {
    await execution.fail(error);
    throw error;
  }
  return execution.transact(runner, (tx) => handler(tx, prepared));
}
