import type { BatchObservableCallback, Observable } from '@opentelemetry/api';
import { InvalidOptionError } from '../core/errors.js';
import { type TelemetryOptions, telemetry } from './instruments.js';
import { STATS_GAUGES, type StatsSource } from './prometheus.js';

/** Options of {@link observeStoreStats}. */
export interface StoreStatsGaugeOptions extends TelemetryOptions {
  /**
   * The clock the application uses for `expires` and leases, called at each collection. Default
   * `Date.now() / 1000`.
   */
  readonly now?: () => number;
}

/** The gauges {@link observeStoreStats} registered; `stop()` unregisters them. */
export interface StoreStatsGauges {
  /** Stops reading the store at collections. */
  stop(): void;
}

/**
 * Exposes the store's `stats` as OpenTelemetry observable gauges, read at each collection of the
 * meter provider: `idempotency.pending_keys`, `idempotency.done_keys`,
 * `idempotency.expired_keys`, `idempotency.stale_pending_keys` and, for a store with leases,
 * `idempotency.lapsed_pending_keys` and `idempotency.unrecorded_keys` (a Prometheus exporter names
 * them as `prometheusStats` does: `idempotency_lapsed_pending_keys`, …). Alert on the lapsed gauge
 * for stuck work and on the unrecorded gauge for keys waiting for a person. Without
 * `@opentelemetry/api` it registers nothing.
 *
 * @param store - any dialect's store
 * @param options - the providers and the clock, see {@link StoreStatsGaugeOptions}
 * @example
 * ```ts
 * import { observeStoreStats } from 'drizzle-idempotency/observe';
 *
 * const gauges = observeStoreStats(store);   // the global meter provider
 * process.once('SIGTERM', () => gauges.stop());
 * ```
 * @throws {@link InvalidOptionError} for a `now` that is not a function
 */
export function observeStoreStats(
  store: StatsSource,
  options: StoreStatsGaugeOptions = {},
): StoreStatsGauges {
  if (options.now !== undefined && typeof options.now !== 'function') {
    throw new InvalidOptionError('now must be a function');
  }
  const clock = options.now ?? (() => Date.now() / 1000);
  const resolved = telemetry(options);
  if (resolved === null) return { stop: () => undefined };
  const { meter } = resolved;
  const gauges = STATS_GAUGES.map((gauge) => ({
    gauge,
    observable: meter.createObservableGauge(`idempotency.${gauge.name}`, {
      description: gauge.help,
      unit: '{key}',
    }),
  }));
  const callback: BatchObservableCallback = async (result) => {
    const stats = await store.stats(clock());
    for (const { gauge, observable } of gauges) {
      const value = gauge.value(stats);
      if (value !== undefined) result.observe(observable, value);
    }
  };
  const observables: Observable[] = gauges.map(({ observable }) => observable);
  meter.addBatchObservableCallback(callback, observables);
  return { stop: () => meter.removeBatchObservableCallback(callback, observables) };
}
