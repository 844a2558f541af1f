import type { Attributes } from '@opentelemetry/api';
import { InvalidOptionError } from '../core/errors.js';
import { errorType, type TelemetryOptions, telemetry } from './instruments.js';

/** Options of {@link instrumentStore}. */
export interface InstrumentStoreOptions extends TelemetryOptions {
  /**
   * The dialect the store speaks, recorded on every span and measurement as
   * `idempotency.dialect`: `'sqlite'`, `'postgresql'`, `'mysql'` or your own name.
   */
  readonly dialect: string;
  /**
   * Record the idempotency key on spans as `idempotency.key`. Default `false`: keys are often
   * secrets chosen by clients, so they are left out unless you ask.
   */
  readonly recordKeys?: boolean;
}

/** The span name prefix of store operations: `idempotency.store.reserve`, … */
export const STORE_SPAN_PREFIX = 'idempotency.store.';

/** Metric names of the store instrumentation. */
export const StoreMetric = {
  /** Histogram of store operation latency in seconds, by `idempotency.operation` and dialect. */
  duration: 'idempotency.store.duration',
  /** Counter of rows deleted by retention (`sweepBatch` and `purge`). */
  sweepDeleted: 'idempotency.sweep.deleted',
  /** Counter of retention batches that deleted at least one row. */
  sweepBatches: 'idempotency.sweep.batches',
  /** Counter of `acquire` calls that took over a pending key whose lease had lapsed. */
  takeovers: 'idempotency.lease.takeovers',
} as const;

// Operations whose first argument is the idempotency key.
const KEYED = new Set([
  'reserve',
  'acquire',
  'renew',
  'finish',
  'release',
  'markUnrecorded',
  'releasePending',
  'fetch',
  'get',
]);

// Buckets for latencies from a prepared SQLite statement (tens of µs) to a slow network round trip.
const DURATION_BUCKETS = [
  0.000_05, 0.000_1, 0.000_25, 0.000_5, 0.001, 0.002_5, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1,
  2.5,
];

function isThenable(value: unknown): value is PromiseLike<unknown> {
  return (
    typeof value === 'object' &&
    value !== null &&
    typeof (value as { then?: unknown }).then === 'function'
  );
}

// What retention deleted: a row count from `sweepBatch`, the ids from `purge`.
function deletedRows(operation: string, result: unknown): number | undefined {
  if (operation === 'sweepBatch' && typeof result === 'number') return result;
  if (operation === 'purge' && Array.isArray(result)) return result.length;
  return undefined;
}

// Whether an `acquire` took over a lapsed lease: the handler of its key may have run before.
function tookOver(result: unknown): boolean {
  return (
    typeof result === 'object' &&
    result !== null &&
    (result as { takenOver?: unknown }).takenOver === true
  );
}

// A short, key-free summary of a result for the span: a boolean answer, or a status name (and a
// takeover).
function resultAttributes(result: unknown): Attributes {
  if (typeof result === 'boolean') return { 'idempotency.result': result };
  if (typeof result === 'string') return { 'idempotency.result': result };
  if (typeof result === 'object' && result !== null) {
    const { status } = result as { status?: unknown };
    if (typeof status !== 'string') return {};
    return tookOver(result)
      ? { 'idempotency.result': status, 'idempotency.taken_over': true }
      : { 'idempotency.result': status };
  }
  return {};
}

/**
 * Wraps any store so that every operation is traced and timed with OpenTelemetry: one span per
 * call (`idempotency.store.<operation>`, attributes `idempotency.operation`,
 * `idempotency.dialect`, `idempotency.result` for a boolean or status answer, `error.type` when it
 * throws), the latency histogram {@link StoreMetric.duration} by operation and dialect, and the
 * retention counters {@link StoreMetric.sweepDeleted} and {@link StoreMetric.sweepBatches} from
 * every `sweepBatch` and `purge` (so a `sweep` over the wrapped store is counted), and on a store
 * with leases {@link StoreMetric.takeovers} (with `idempotency.taken_over` on the span) for every
 * `acquire` that took over a lapsed lease.
 *
 * The wrapper has the store's own type and keeps it synchronous where it is (a SQLite store still
 * answers without a promise). Calls the store makes to itself are not traced twice. Keys are not
 * recorded unless `recordKeys` is set, and error messages (which may quote a key) never are: a
 * failed span carries only the error's code or class name.
 *
 * `@opentelemetry/api` is an optional peer dependency: without it the store is returned as it is.
 *
 * @param store - any store, e.g. `openSqliteStore(path)` or `openPgStore(url)`
 * @param options - see {@link InstrumentStoreOptions}
 * @example
 * ```ts
 * import { instrumentStore } from 'drizzle-idempotency/observe';
 * import { openSqliteStore } from 'drizzle-idempotency/sqlite';
 *
 * const store = instrumentStore(openSqliteStore('./idempotency.db'), { dialect: 'sqlite' });
 * store.reserve('order-1', 'fingerprint', Date.now() / 1000 + 3600);
 * ```
 * @throws {@link InvalidOptionError} for a missing `dialect` or a non-boolean `recordKeys`
 */
export function instrumentStore<S extends object>(store: S, options: InstrumentStoreOptions): S {
  if (typeof options !== 'object' || options === null) {
    throw new InvalidOptionError('instrumentStore options must be an object with `dialect`');
  }
  const { dialect, recordKeys = false } = options;
  if (typeof dialect !== 'string' || dialect === '') {
    throw new InvalidOptionError('dialect must be a non-empty string, e.g. "sqlite"');
  }
  if (typeof recordKeys !== 'boolean') {
    throw new InvalidOptionError(`recordKeys must be a boolean, got ${typeof recordKeys}`);
  }
  const found = telemetry(options);
  if (found === null) return store;
  const { api, tracer, meter } = found;
  const duration = meter.createHistogram(StoreMetric.duration, {
    description: 'Latency of idempotency store operations',
    unit: 's',
    advice: { explicitBucketBoundaries: DURATION_BUCKETS },
  });
  const sweepDeleted = meter.createCounter(StoreMetric.sweepDeleted, {
    description: 'Rows deleted by retention (sweep batches and purges)',
    unit: '{row}',
  });
  const sweepBatches = meter.createCounter(StoreMetric.sweepBatches, {
    description: 'Retention batches that deleted at least one row',
    unit: '{batch}',
  });
  const takeovers = meter.createCounter(StoreMetric.takeovers, {
    description: 'Pending keys taken over after their lease lapsed',
    unit: '{key}',
  });

  function traced(operation: string, call: () => unknown, key: unknown): unknown {
    const attributes: Attributes = {
      'idempotency.operation': operation,
      'idempotency.dialect': dialect,
    };
    const span = tracer.startSpan(`${STORE_SPAN_PREFIX}${operation}`, {
      kind: api.SpanKind.INTERNAL,
      attributes:
        recordKeys && typeof key === 'string'
          ? { ...attributes, 'idempotency.key': key }
          : attributes,
    });
    const started = performance.now();
    const succeeded = (result: unknown): unknown => {
      duration.record((performance.now() - started) / 1000, attributes);
      const deleted = deletedRows(operation, result);
      if (deleted !== undefined && deleted > 0) {
        sweepDeleted.add(deleted, attributes);
        sweepBatches.add(1, attributes);
      }
      if (tookOver(result)) takeovers.add(1, attributes);
      span.setAttributes(resultAttributes(result));
      span.end();
      return result;
    };
    const failed = (error: unknown): never => {
      const type = errorType(error);
      duration.record((performance.now() - started) / 1000, { ...attributes, 'error.type': type });
      span.setAttribute('error.type', type);
      span.setStatus({ code: api.SpanStatusCode.ERROR, message: type });
      span.end();
      throw error;
    };
    let result: unknown;
    try {
      result = call();
    } catch (error) {
      return failed(error);
    }
    return isThenable(result) ? result.then(succeeded, failed) : succeeded(result);
  }

  const wrappers = new Map<string, (...args: unknown[]) => unknown>();
  return new Proxy(store, {
    get(target, property) {
      // The target as receiver: stores keep their state in private fields, which a proxy lacks.
      const value: unknown = Reflect.get(target, property, target);
      if (
        typeof value !== 'function' ||
        typeof property !== 'string' ||
        property === 'constructor'
      ) {
        return value;
      }
      let wrapper = wrappers.get(property);
      if (wrapper === undefined) {
        const method = value as (...args: unknown[]) => unknown;
        const operation = property;
        wrapper = (...args: unknown[]) =>
          traced(
            operation,
            () => method.apply(target, args),
            KEYED.has(operation) ? args[0] : undefined,
          );
        wrappers.set(property, wrapper);
      }
      return wrapper;
    },
  });
}
