import { createRequire } from 'node:module';
import type * as OtelApi from '@opentelemetry/api';

/** The `@opentelemetry/api` module, as this library uses it. */
export type OpenTelemetryApi = typeof OtelApi;

let loaded: OpenTelemetryApi | null | undefined;

/**
 * The application's `@opentelemetry/api`, or `null` when it is not installed. It is an optional
 * peer: loading it lazily, once, and only here keeps every subpath importable without it, and an
 * absent API makes every instrument a no-op. `require` (not `import()`) keeps instrumenting
 * synchronous, so a synchronous store stays synchronous; the API keeps its registry on
 * `globalThis`, so the providers an application registers through its ESM copy are seen here too.
 */
export function openTelemetryApi(): OpenTelemetryApi | null {
  if (loaded !== undefined) return loaded;
  try {
    // Resolved from this module's own URL (the CommonJS build shims it): the ES module build's
    // `require` is a bundler stand-in that throws on every call, which read as "API absent" and
    // silently turned every instrument into a no-op.
    const load = typeof import.meta.url === 'string' ? createRequire(import.meta.url) : require;
    loaded = load('@opentelemetry/api') as OpenTelemetryApi;
  } catch {
    loaded = null;
  }
  return loaded;
}
