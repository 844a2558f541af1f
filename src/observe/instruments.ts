import type { Meter, MeterProvider, Tracer, TracerProvider } from '@opentelemetry/api';
import { openTelemetryApi } from './otel.js';

/** The instrumentation scope name every tracer and meter of this library uses. */
export const INSTRUMENTATION_NAME = 'drizzle-idempotency';

/** Where spans and metrics go: the application's providers, or the global ones by default. */
export interface TelemetryOptions {
  /**
   * The tracer provider to take the tracer from. Default: the global one registered with
   * `@opentelemetry/api` (spans follow it even when it is registered later).
   */
  readonly tracerProvider?: TracerProvider;
  /**
   * The meter provider to take the meter from. Default: the global one registered with
   * `@opentelemetry/api` **when instrumenting**: register the SDK first, or pass it here.
   */
  readonly meterProvider?: MeterProvider;
}

/** The tracer and meter of one instrumentation, or `null` when `@opentelemetry/api` is absent. */
export interface Telemetry {
  readonly api: NonNullable<ReturnType<typeof openTelemetryApi>>;
  readonly tracer: Tracer;
  readonly meter: Meter;
}

/** Resolves the tracer and meter for `options`, or `null` without `@opentelemetry/api`. */
export function telemetry(options: TelemetryOptions): Telemetry | null {
  const api = openTelemetryApi();
  if (api === null) return null;
  const tracerProvider = options.tracerProvider ?? api.trace.getTracerProvider();
  const meterProvider = options.meterProvider ?? api.metrics.getMeterProvider();
  return {
    api,
    tracer: tracerProvider.getTracer(INSTRUMENTATION_NAME),
    meter: meterProvider.getMeter(INSTRUMENTATION_NAME),
  };
}

/**
 * The `error.type` of a failure: its stable code when it has one (our errors, driver errors such as
 * `SQLITE_BUSY`), else its class name; never its message, which may quote a key.
 */
export function errorType(error: unknown): string {
  if (!(error instanceof Error)) return 'Error';
  const { code } = error as Error & { code?: unknown };
  return typeof code === 'string' ? code : error.name;
}
