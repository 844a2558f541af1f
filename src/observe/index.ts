/**
 * Observability: OpenTelemetry spans and metrics over any store and over the HTTP layer's
 * requests, and the store's gauges in the Prometheus text format. `@opentelemetry/api` is an
 * optional peer dependency; without it every instrument is a no-op.
 *
 * @module
 */
export type { InstrumentStoreOptions } from './instrument-store.js';
export { instrumentStore, STORE_SPAN_PREFIX, StoreMetric } from './instrument-store.js';
export type { TelemetryOptions } from './instruments.js';
export { INSTRUMENTATION_NAME } from './instruments.js';
export type { PrometheusStatsOptions, StatsSource } from './prometheus.js';
export {
  formatPrometheusStats,
  PROMETHEUS_CONTENT_TYPE,
  prometheusStats,
} from './prometheus.js';
export type { RequestTelemetryOptions } from './requests.js';
export { outcomeName, RequestMetric, requestTelemetry } from './requests.js';
export type { StoreStatsGaugeOptions, StoreStatsGauges } from './stats-gauges.js';
export { observeStoreStats } from './stats-gauges.js';
