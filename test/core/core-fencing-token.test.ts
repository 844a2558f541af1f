import { afterEach, describe, expect, it, vi } from 'vitest';
import { nextFencingToken } from '../../src/core/fencing-token.js';

afterEach(() => {
  vi.restoreAllMocks();
});

describe('nextFencingToken', () => {
  it('draws an even safe integer from the real clock: milliseconds × 1024 plus random bits', () => {
    const before = Date.now();
    const token = nextFencingToken();
    const after = Date.now();
    expect(Number.isSafeInteger(token)).toBe(true);
    expect(token % 2).toBe(0);
    expect(token).toBeGreaterThanOrEqual(before * 1024);
    // Above the drawn value only by the steps of tokens issued earlier in this process.
    expect(Math.floor(token / 1024)).toBeLessThanOrEqual(after + 1);
  });

  it('strictly increases, by two at least, while the real clock stands still or steps back', () => {
    const frozen = Date.now();
    const clock = vi.spyOn(Date, 'now').mockReturnValue(frozen);
    const tokens = Array.from({ length: 2000 }, () => nextFencingToken());
    clock.mockReturnValue(frozen - 60_000);
    tokens.push(...Array.from({ length: 10 }, () => nextFencingToken()));
    for (let i = 1; i < tokens.length; i++) {
      expect((tokens[i] ?? 0) - (tokens[i - 1] ?? 0)).toBeGreaterThanOrEqual(2);
    }
    expect(tokens.every((token) => token % 2 === 0)).toBe(true);
  });

  it('stays a safe integer for centuries: the year 2200 still fits', () => {
    vi.spyOn(Date, 'now').mockReturnValue(Date.UTC(2200, 0, 1));
    expect(Number.isSafeInteger(nextFencingToken())).toBe(true);
  });
});
