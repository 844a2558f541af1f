import { describe, expect, it } from 'vitest';
import type { LeasedIdempotencyStore } from '../../src/index.js';
import { fixture, runTs } from './child.js';

/** Where the child processes meet: a SQLite file or a PostgreSQL URL, and the test's own store on it. */
export interface FencingTarget {
  /** What the children open: a SQLite file path or a PostgreSQL URL. */
  readonly target: string;
  /** The test's own store on the same database, as the operator's. */
  readonly store: LeasedIdempotencyStore;
  /** Ends the store and drops what was made. */
  close(): Promise<void>;
}

const HOUR = 3_600_000;
// More claims than a millisecond of the earlier clock-based tokens spanned (1,024 values, two
// apart), where a clock a millisecond behind the other's swept over its token; a few where the
// clocks stand hours apart.
const SWEEP = 1100;
const FEW = 50;

async function inChild<R>(args: string[]): Promise<R> {
  const result = await runTs(fixture('fencing-clock.ts'), args);
  if (result.code !== 0) throw new Error(`the child failed (${result.code}): ${result.stderr}`);
  return JSON.parse(result.stdout) as R;
}

/**
 * Issue 33, item 9: two real processes claim one key in turn, an operator releasing it between
 * them, with their real clocks frozen at the same value or hours apart. No ownership of the key
 * gets a token another one had, the first owner's stale finish is refused and the last owner's
 * lands.
 */
export function describeFencingClocks(dialect: string, open: () => Promise<FencingTarget>): void {
  describe(`fencing tokens across processes whatever their clocks read: ${dialect}`, () => {
    const base = Date.now();
    it.each([
      { name: 'both frozen at the same millisecond', first: base, second: base, cycles: SWEEP },
      { name: 'the second a millisecond behind', first: base, second: base - 1, cycles: SWEEP },
      { name: 'the second three hours behind', first: base, second: base - 3 * HOUR, cycles: FEW },
      { name: 'the second three hours ahead', first: base, second: base + 3 * HOUR, cycles: FEW },
    ])('$name', { timeout: 300_000 }, async ({ first, second, cycles }) => {
      const { target, store, close } = await open();
      try {
        const key = 'order-42';
        const {
          tokens: [stale],
        } = await inChild<{ tokens: number[] }>(['claim', target, String(first), key, '1']);
        if (stale === undefined) throw new Error('the first process got no token');
        // The operator gives the key back while its first owner is still alive.
        expect(await store.releasePending(key)).toBe('released');
        const { tokens } = await inChild<{ tokens: number[] }>([
          'claim',
          target,
          String(second),
          key,
          String(cycles),
        ]);
        expect(tokens).toHaveLength(cycles);
        expect(tokens).not.toContain(stale);
        expect(new Set(tokens).size).toBe(cycles);
        const kept = tokens.at(-1) as number;
        const late = await inChild<{ landed: boolean }>([
          'finish',
          target,
          String(first),
          key,
          String(stale),
        ]);
        expect(late.landed).toBe(false);
        const own = await inChild<{ landed: boolean }>([
          'finish',
          target,
          String(second),
          key,
          String(kept),
        ]);
        expect(own.landed).toBe(true);
        expect(await store.get(key)).toMatchObject({
          status: 'done',
          fencingToken: kept,
          response: { clock: second },
        });
      } finally {
        await close();
      }
    });
  });
}
