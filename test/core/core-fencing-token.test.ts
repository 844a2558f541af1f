import { afterEach, describe, expect, it, vi } from 'vitest';
import { nextFencingToken } from '../../src/core/fencing-token.js';

afterEach(() => {
  vi.restoreAllMocks();
});

describe('nextFencingToken', () => {
  it('draws an even safe integer from 2^52 up, below 2^52 + 2^51', () => {
    for (let i = 0; i < 10_000; i++) {
      const token = nextFencingToken();
      expect(Number.isSafeInteger(token)).toBe(true);
      expect(token % 2).toBe(0);
      expect(token).toBeGreaterThanOrEqual(2 ** 52);
      expect(token).toBeLessThan(2 ** 52 + 2 ** 51);
    }
  });

  it('stays above every clock-based token of earlier releases, whatever the clock reads', () => {
    // Those were real-clock milliseconds × 1,024 plus less than 1,024.
    const earlier = Date.UTC(2100, 0, 1) * 1024 + 1023;
    vi.spyOn(Date, 'now').mockReturnValue(Date.UTC(1970, 0, 1));
    expect(nextFencingToken()).toBeGreaterThan(earlier);
  });

  it('never repeats in 200,000 draws while the real clock stands still, steps back or leaps ahead', () => {
    const clock = vi.spyOn(Date, 'now');
    const seen = new Set<number>();
    for (const reading of [0, Date.now(), Date.now() - 3_600_000, Date.now() + 3_600_000]) {
      clock.mockReturnValue(reading);
      for (let i = 0; i < 50_000; i++) seen.add(nextFencingToken());
    }
    expect(seen.size).toBe(200_000);
  });
});
