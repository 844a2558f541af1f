/** Milliseconds since an arbitrary origin, with sub-microsecond resolution. */
export function nowMs(): number {
  return performance.now();
}

/** Milliseconds since the Unix epoch with sub-millisecond resolution: comparable across processes. */
export function epochMs(): number {
  return performance.timeOrigin + performance.now();
}

/** The median of a non-empty list. */
export function median(values: readonly number[]): number {
  return percentile(values, 50);
}

/** The p-th percentile (nearest rank) of a non-empty list. */
export function percentile(values: readonly number[], p: number): number {
  if (values.length === 0) throw new Error('percentile of an empty list');
  const sorted = [...values].sort((a, b) => a - b);
  const rank = Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1));
  return sorted[rank] as number;
}

/** Operations per second of `count` calls of `op`, timed as one block. */
export function opsPerSecond(count: number, op: (index: number) => void): number {
  const start = nowMs();
  for (let index = 0; index < count; index++) op(index);
  return count / ((nowMs() - start) / 1000);
}

/**
 * Runs the two sides of a comparison alternately, `rounds` times, swapping which goes first each
 * round so neither always runs on a warmer cache, and returns every round's figure of each side.
 */
export function alternate(
  rounds: number,
  ours: (round: number) => number | Promise<number>,
  theirs: (round: number) => number | Promise<number>,
): Promise<{ ours: number[]; theirs: number[] }> {
  return rotate(rounds, { ours, theirs });
}

/**
 * {@link alternate} for any number of sides: each round runs every side once, starting one side
 * further along each round, and returns every round's figure of each side.
 */
export async function rotate<Side extends string>(
  rounds: number,
  sides: Record<Side, (round: number) => number | Promise<number>>,
): Promise<Record<Side, number[]>> {
  const names = Object.keys(sides) as Side[];
  const result = Object.fromEntries(names.map((name) => [name, [] as number[]])) as Record<
    Side,
    number[]
  >;
  for (let round = 0; round < rounds; round++) {
    for (let step = 0; step < names.length; step++) {
      const name = names[(round + step) % names.length] as Side;
      result[name].push(await sides[name](round));
    }
  }
  return result;
}

/**
 * The median of the per-round ratios ours ÷ theirs. Each round's two figures were measured next
 * to each other, so a burst of load from elsewhere skews one pair, not the result.
 */
export function medianRatio(sides: { ours: readonly number[]; theirs: readonly number[] }): number {
  return median(sides.ours.map((value, round) => value / (sides.theirs[round] as number)));
}
