import type { ResolvedOptions } from './options.js';
import type { IdempotentResult, OutcomeEvent } from './outcome.js';
import type { IdempotentRequest } from './request.js';

/** Tells the `onOutcome` hook, if any; what it throws never reaches the request. */
export type Report = (
  result: Pick<OutcomeEvent, 'outcome' | 'status' | 'problem' | 'error'>,
) => void;

// The report of a layer without a hook: one function for every request, nothing built per call.
const silent: Report = () => undefined;

/** The {@link Report} of one request: it adds what the request is to each outcome. */
export function reporter(
  settings: ResolvedOptions,
  request: IdempotentRequest,
  key: string | undefined,
  started: number,
  run?: { readonly fencingToken: number; readonly takenOver: boolean },
): Report {
  const hook = settings.onOutcome;
  if (hook === undefined) return silent;
  return (result) => {
    try {
      hook({
        ...result,
        method: request.method,
        path: request.path,
        key,
        scoped: request.scope !== undefined,
        ...(run === undefined ? {} : { fencingToken: run.fencingToken, takenOver: run.takenOver }),
        durationMs: performance.now() - started,
      });
    } catch {
      // A broken hook (logging, metrics) must never change what the client gets.
    }
  };
}

/** Reports `result` under its own outcome, or `outcome` when given, and returns it. */
export function reported(
  report: Report,
  result: IdempotentResult,
  outcome: OutcomeEvent['outcome'] = result.outcome,
): IdempotentResult {
  if (report === silent) return result;
  report({
    outcome,
    status: result.response.status,
    ...(result.outcome === 'problem' ? { problem: result.problem } : {}),
  });
  return result;
}
