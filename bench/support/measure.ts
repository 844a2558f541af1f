import type { Metric } from './report.js';

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

const RESAMPLES = 2000;

// A fixed-seed generator (mulberry32): the same samples give the same interval on every run.
function seededRandom(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

function resample(values: readonly number[], random: () => number): number[] {
  return values.map(() => values[Math.floor(random() * values.length)] as number);
}

function interval(value: number, estimates: number[]): Metric {
  return { value, low: percentile(estimates, 2.5), high: percentile(estimates, 97.5) };
}

/**
 * The median of `values` with its bootstrap 95 % interval: the median recomputed on `RESAMPLES`
 * resamples (with replacement) of the values.
 */
export function medianWithInterval(values: readonly number[]): Metric {
  const random = seededRandom(values.length);
  const estimates = Array.from({ length: RESAMPLES }, () => median(resample(values, random)));
  return interval(median(values), estimates);
}

/**
 * The median of the per-round ratios ours ÷ theirs, with its bootstrap 95 % interval. The rounds
 * are resampled as pairs, since each pair was measured side by side.
 */
export function pairedRatio(sides: { ours: readonly number[]; theirs: readonly number[] }): Metric {
  return medianWithInterval(
    sides.ours.map((value, round) => value / (sides.theirs[round] as number)),
  );
}

/**
 * median(`top`) ÷ median(`bottom`) of two independent samples, with its bootstrap 95 % interval
 * (each sample resampled on its own).
 */
export function ratioOfMedians(top: readonly number[], bottom: readonly number[]): Metric {
  const random = seededRandom(top.length * 7919 + bottom.length);
  const estimates = Array.from(
    { length: RESAMPLES },
    () => median(resample(top, random)) / median(resample(bottom, random)),
  );
  return interval(median(top) / median(bottom), estimates);
}

/** Throws unless `condition`: every timed write checks that it changed what it should. */
export function check(condition: boolean, what: string): void {
  if (!condition) throw new Error(`benchmark side did nothing: ${what}`);
}
