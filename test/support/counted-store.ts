import { onTestFinished } from 'vitest';
import { instrumentStore, STORE_SPAN_PREFIX } from '../../src/observe/index.js';
import { otelHarness } from './otel.js';

/** A real store wrapped by `instrumentStore`, and the count of its calls by operation. */
export interface CountedStore<S> {
  readonly store: S;
  /** How many calls of `operation` (`'get'`, `'acquire'`, …) have finished so far. */
  calls(operation: string): number;
  /** How many calls of `operation` on `key` have finished so far. */
  callsOn(operation: string, key: string): number;
}

/**
 * Wraps `store` with the package's own OpenTelemetry instrumentation over the real SDK exporting
 * into memory, so a test counts the store operations a layer made (every statement it sent)
 * without touching the driver. Call it inside a test: the SDK is shut down when the test ends.
 */
export function countedStore<S extends object>(store: S): CountedStore<S> {
  const otel = otelHarness();
  onTestFinished(() => otel.shutdown());
  const wrapped = instrumentStore(store, {
    dialect: 'test',
    recordKeys: true,
    tracerProvider: otel.tracerProvider,
    meterProvider: otel.meterProvider,
  });
  const spans = (operation: string) =>
    otel.spans().filter((span) => span.name === `${STORE_SPAN_PREFIX}${operation}`);
  return {
    store: wrapped,
    calls: (operation) => spans(operation).length,
    callsOn: (operation, key) =>
      spans(operation).filter((span) => span.attributes['idempotency.key'] === key).length,
  };
}
