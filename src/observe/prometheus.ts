import { InvalidOptionError } from '../core/errors.js';
import type { LeaseStats, RetentionStats } from '../core/store.js';
import { assertTime } from '../core/validation.js';

/** What {@link prometheusStats} needs from a store: any dialect's store provides it. */
export interface StatsSource {
  stats(now: number): RetentionStats | LeaseStats | Promise<RetentionStats | LeaseStats>;
}

/** Options of {@link prometheusStats} and {@link formatPrometheusStats}. */
export interface PrometheusStatsOptions {
  /**
   * Prefix of every metric name. Default `idempotency`: `idempotency_pending_keys`, … Letters,
   * digits and underscores, not starting with a digit.
   */
  readonly prefix?: string;
  /**
   * Labels added to every sample, e.g. `{ table: 'keys', instance: 'eu-1' }` when one Prometheus
   * scrapes several stores. Names as for `prefix`; values any string.
   */
  readonly labels?: Readonly<Record<string, string>>;
}

/** One gauge: its name after the prefix, its help text, and where its value comes from. */
export interface StatsGauge {
  readonly name: string;
  readonly help: string;
  /** The value, or `undefined` for a count the store does not keep (no leases). */
  readonly value: (stats: RetentionStats | LeaseStats) => number | undefined;
}

/**
 * The gauges of `stats`, in exposition order, shared by the Prometheus text and the OpenTelemetry
 * gauges. Names end in `_keys` (a number of rows), the Prometheus way of naming a unit.
 */
export const STATS_GAUGES: readonly StatsGauge[] = [
  {
    name: 'pending_keys',
    help: 'Keys whose work is in flight (status pending).',
    value: (stats) => stats.pending,
  },
  {
    name: 'done_keys',
    help: 'Keys holding a stored answer (status done), expired or not.',
    value: (stats) => stats.done,
  },
  {
    name: 'expired_keys',
    help: 'Done keys past their retention deadline: the backlog a sweep deletes.',
    value: (stats) => stats.expired,
  },
  {
    name: 'stale_pending_keys',
    help: 'Pending keys past their retention deadline: never deleted by retention, look at them.',
    value: (stats) => stats.stalePending,
  },
  {
    name: 'lapsed_pending_keys',
    help: 'Pending keys whose lease lapsed: their owner stopped renewing, the next retry takes them over.',
    value: (stats) => ('lapsed' in stats ? stats.lapsed : undefined),
  },
  {
    name: 'unrecorded_keys',
    help: 'Pending keys whose handler ran but whose answer was not recorded: each waits for an operator.',
    value: (stats) => ('unrecorded' in stats ? stats.unrecorded : undefined),
  },
];

const NAME = /^[a-zA-Z_][a-zA-Z0-9_]*$/;

function escapeLabelValue(value: string): string {
  return value.replace(/\\/g, '\\\\').replace(/\n/g, '\\n').replace(/"/g, '\\"');
}

function labelText(labels: Readonly<Record<string, string>>): string {
  const pairs = Object.entries(labels).map(
    ([name, value]) => `${name}="${escapeLabelValue(value)}"`,
  );
  return pairs.length === 0 ? '' : `{${pairs.join(',')}}`;
}

function checkedOptions(options: PrometheusStatsOptions): { prefix: string; labels: string } {
  if (typeof options !== 'object' || options === null) {
    throw new InvalidOptionError('Prometheus options must be an object');
  }
  const prefix = options.prefix ?? 'idempotency';
  if (typeof prefix !== 'string' || !NAME.test(prefix)) {
    throw new InvalidOptionError(
      `prefix must be letters, digits and underscores, not starting with a digit, got ${JSON.stringify(prefix)}`,
    );
  }
  const labels = options.labels ?? {};
  if (typeof labels !== 'object' || labels === null) {
    throw new InvalidOptionError('labels must be an object of label names to string values');
  }
  for (const [name, value] of Object.entries(labels)) {
    if (!NAME.test(name) || name.startsWith('__')) {
      throw new InvalidOptionError(`label name ${JSON.stringify(name)} is not a Prometheus name`);
    }
    if (typeof value !== 'string') {
      throw new InvalidOptionError(`label ${name} must be a string, got ${typeof value}`);
    }
  }
  return { prefix, labels: labelText(labels) };
}

/** The `Content-Type` of the Prometheus text exposition format, for a `/metrics` route. */
export const PROMETHEUS_CONTENT_TYPE = 'text/plain; version=0.0.4; charset=utf-8';

/**
 * Formats a store's `stats(now)` as gauges in the Prometheus text exposition format (version
 * 0.0.4): `<prefix>_pending_keys`, `<prefix>_done_keys`, `<prefix>_expired_keys` (the retention
 * backlog) and `<prefix>_stale_pending_keys`, and for a store with leases
 * `<prefix>_lapsed_pending_keys` and `<prefix>_unrecorded_keys`; each with `# HELP` and `# TYPE`,
 * ending in a newline.
 *
 * @param stats - what `store.stats(now)` returned (`RetentionStats`, or `LeaseStats` with leases)
 * @param options - see {@link PrometheusStatsOptions}
 * @example
 * ```ts
 * import { formatPrometheusStats } from 'drizzle-idempotency/observe';
 *
 * const text = formatPrometheusStats({ pending: 2, done: 40, expired: 5, stalePending: 0 });
 * // # HELP idempotency_pending_keys Keys whose work is in flight (status pending).
 * // # TYPE idempotency_pending_keys gauge
 * // idempotency_pending_keys 2
 * // …
 * ```
 * @throws {@link InvalidOptionError} for a bad prefix or label
 */
export function formatPrometheusStats(
  stats: RetentionStats | LeaseStats,
  options: PrometheusStatsOptions = {},
): string {
  const { prefix, labels } = checkedOptions(options);
  const lines: string[] = [];
  for (const gauge of STATS_GAUGES) {
    const value = gauge.value(stats);
    if (value === undefined) continue;
    const name = `${prefix}_${gauge.name}`;
    lines.push(`# HELP ${name} ${gauge.help}`, `# TYPE ${name} gauge`);
    lines.push(`${name}${labels} ${value}`);
  }
  return `${lines.join('\n')}\n`;
}

/**
 * Reads `store.stats(now)` and returns it in the Prometheus text exposition format, for a
 * `/metrics` route (send it with {@link PROMETHEUS_CONTENT_TYPE}). See
 * {@link formatPrometheusStats} for the gauges. `stats` counts rows, so scrape it every 15–60 s,
 * not on every request.
 *
 * @param store - any store (SQLite, PostgreSQL, …), or anything with `stats(now)`
 * @param now - the time to count expiry at, on the clock your `expires` use (seconds)
 * @param options - see {@link PrometheusStatsOptions}
 * @example
 * ```ts
 * import { PROMETHEUS_CONTENT_TYPE, prometheusStats } from 'drizzle-idempotency/observe';
 * import { openSqliteStore } from 'drizzle-idempotency/sqlite';
 *
 * const store = openSqliteStore('./idempotency.db');
 * const body = await prometheusStats(store, Date.now() / 1000);
 * const response = new Response(body, { headers: { 'content-type': PROMETHEUS_CONTENT_TYPE } });
 * ```
 * @throws {@link InvalidTimeError} for a `now` that is not a finite number, and
 * {@link InvalidOptionError} for a bad option, before the store is read
 */
export async function prometheusStats(
  store: StatsSource,
  now: number,
  options: PrometheusStatsOptions = {},
): Promise<string> {
  assertTime(now, 'now');
  checkedOptions(options);
  return formatPrometheusStats(await store.stats(now), options);
}
