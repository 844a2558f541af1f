/** What one benchmark group measured: metrics by name, plus raw figures behind them. */
export interface GroupResult {
  readonly metrics: Record<string, number>;
  /** The figures a ratio was computed from (ops/s, ms), printed beside the table. */
  readonly details: Record<string, number>;
}

/** Sizes for a full run and for `--quick`. */
export interface BenchSize {
  readonly quick: boolean;
}
