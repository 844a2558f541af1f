import type { Attributes } from '@opentelemetry/api';
import { InvalidOptionError } from '../core/errors.js';
import type { OutcomeEvent } from '../http/outcome.js';
import { type TelemetryOptions, telemetry } from './instruments.js';

/** Options of {@link requestTelemetry}. */
export interface RequestTelemetryOptions extends TelemetryOptions {
  /**
   * The dialect of the layer's store, recorded on spans and measurements as
   * `idempotency.dialect` (as `instrumentStore` does). Default: not recorded.
   */
  readonly dialect?: string;
  /**
   * Record the stored key id (scope included) on request spans as `idempotency.key`. Default
   * `false`: keys are often secrets chosen by clients.
   */
  readonly recordKeys?: boolean;
  /**
   * Another `onOutcome` hook to call after recording, e.g. your own logger. What it throws never
   * reaches the request.
   */
  readonly next?: (event: OutcomeEvent) => void;
}

/** Names of the request instrumentation's span and metrics. */
export const RequestMetric = {
  /** The span of one request through the layer. */
  span: 'idempotency.request',
  /** Counter of requests by `idempotency.outcome`. */
  outcomes: 'idempotency.request.outcomes',
  /** Histogram of the layer's time per request in seconds, by `idempotency.outcome`. */
  duration: 'idempotency.request.duration',
} as const;

// The names operators search for, where a problem's own name says it less plainly.
const PROBLEM_OUTCOMES: Readonly<Record<string, string>> = {
  'key-reused': 'mismatch',
  'request-in-progress': 'in-progress',
  'answer-not-recorded': 'not-recorded',
};

const OUTCOMES: Readonly<Record<string, string>> = {
  executed: 'executed',
  replayed: 'replayed',
  notStored: 'not-stored',
  passedThrough: 'passed-through',
  failed: 'failed',
  outcomeUnknown: 'outcome-declared-unknown',
};

/**
 * The outcome name recorded for an event: `executed`, `replayed`, `not-stored`,
 * `passed-through`, `failed`, `outcome-declared-unknown` (the handler threw `OutcomeUnknownError`),
 * `superseded`, or for a problem `mismatch` (key reused with another request),
 * `in-progress`, `not-recorded`, or the problem's own name (`key-missing`, `key-malformed`,
 * `answer-expired`, …).
 */
export function outcomeName(event: Pick<OutcomeEvent, 'outcome' | 'problem'>): string {
  if (event.outcome === 'problem' && event.problem !== undefined) {
    const slug = event.problem.type.slice(event.problem.type.lastIndexOf(':') + 1);
    return PROBLEM_OUTCOMES[slug] ?? slug;
  }
  return OUTCOMES[event.outcome] ?? event.outcome;
}

/**
 * An `onOutcome` hook for the HTTP layer (every adapter takes it) that records each request with
 * OpenTelemetry: a span `idempotency.request` spanning the layer's time (attributes
 * `idempotency.outcome`, `idempotency.scoped`, `http.request.method`,
 * `http.response.status_code`), the counter
 * {@link RequestMetric.outcomes} and the histogram {@link RequestMetric.duration}, both by
 * `idempotency.outcome`, with `idempotency.taken_over` when the run took over a lapsed lease.
 * Alert on `not-recorded`: each such answer needs a human; `superseded` means a handler ran past
 * its lease and a retry took its key over.
 *
 * `@opentelemetry/api` is an optional peer dependency: without it only `next` is called.
 *
 * @param options - see {@link RequestTelemetryOptions}
 * @example
 * ```ts
 * import { expressIdempotency } from 'drizzle-idempotency/express';
 * import { requestTelemetry } from 'drizzle-idempotency/observe';
 *
 * const middleware = expressIdempotency(store, {
 *   scope: 'global',
 *   onOutcome: requestTelemetry(),
 * });
 * ```
 * @throws {@link InvalidOptionError} for a non-boolean `recordKeys`, an empty `dialect` or a `next`
 * that is not a function
 */
export function requestTelemetry(
  options: RequestTelemetryOptions = {},
): (event: OutcomeEvent) => void {
  if (typeof options !== 'object' || options === null) {
    throw new InvalidOptionError('requestTelemetry options must be an object');
  }
  const { recordKeys = false, next, dialect } = options;
  if (dialect !== undefined && (typeof dialect !== 'string' || dialect === '')) {
    throw new InvalidOptionError('dialect must be a non-empty string, e.g. "sqlite"');
  }
  if (typeof recordKeys !== 'boolean') {
    throw new InvalidOptionError(`recordKeys must be a boolean, got ${typeof recordKeys}`);
  }
  if (next !== undefined && typeof next !== 'function') {
    throw new InvalidOptionError('next must be a function');
  }
  const found = telemetry(options);
  if (found === null) return (event) => next?.(event);
  const { api, tracer, meter } = found;
  const outcomes = meter.createCounter(RequestMetric.outcomes, {
    description: 'Requests through the idempotency layer, by outcome',
    unit: '{request}',
  });
  const duration = meter.createHistogram(RequestMetric.duration, {
    description: 'Time the idempotency layer spent on a request, by outcome',
    unit: 's',
  });

  return (event) => {
    try {
      const outcome = outcomeName(event);
      const metricAttributes: Attributes = { 'idempotency.outcome': outcome };
      if (dialect !== undefined) metricAttributes['idempotency.dialect'] = dialect;
      if (event.takenOver === true) {
        metricAttributes['idempotency.taken_over'] = true;
      }
      outcomes.add(1, metricAttributes);
      duration.record(event.durationMs / 1000, metricAttributes);
      const attributes: Attributes = {
        ...metricAttributes,
        'http.request.method': event.method,
        'idempotency.scoped': event.scoped,
      };
      if (event.status !== undefined) attributes['http.response.status_code'] = event.status;
      if (recordKeys && event.key !== undefined) attributes['idempotency.key'] = event.key;
      // The hook hears of a request once it is decided: its span starts when the layer saw it.
      const end = performance.timeOrigin + performance.now();
      const span = tracer.startSpan(RequestMetric.span, {
        kind: api.SpanKind.INTERNAL,
        startTime: end - event.durationMs,
        attributes,
      });
      if (
        outcome === 'not-recorded' ||
        outcome === 'failed' ||
        outcome === 'superseded' ||
        outcome === 'outcome-declared-unknown'
      ) {
        span.setStatus({ code: api.SpanStatusCode.ERROR, message: outcome });
      }
      span.end(end);
    } finally {
      next?.(event);
    }
  };
}
