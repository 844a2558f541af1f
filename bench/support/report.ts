/**
 * One metric: its value and the bootstrap 95 % interval around it (2.5th and 97.5th percentiles of
 * the value recomputed on resampled rounds).
 */
export interface Metric {
  readonly value: number;
  readonly low: number;
  readonly high: number;
}

/** What one benchmark group measured: metrics by name, plus raw figures behind them. */
export interface GroupResult {
  readonly metrics: Record<string, Metric>;
  /** The figures a ratio was computed from (ops/s, ms), printed beside the table. */
  readonly details: Record<string, number>;
}

/** Sizes for a full run and for `--quick`. */
export interface BenchSize {
  readonly quick: boolean;
}
