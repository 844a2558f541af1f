import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { compareKeys } from '../../src/core/order.js';

const byteOrder = (a: string, b: string) => Buffer.compare(Buffer.from(a), Buffer.from(b));

describe('compareKeys', () => {
  it('orders by UTF-8 bytes where UTF-16 order differs', () => {
    expect(['\u{1F600}', '\uFF5E', 'a', '\uE000', '\uD7FF'].sort(compareKeys)).toEqual([
      'a',
      '\uD7FF',
      '\uE000',
      '\uFF5E',
      '\u{1F600}',
    ]);
    expect(compareKeys('ab', 'a')).toBeGreaterThan(0);
    expect(compareKeys('same', 'same')).toBe(0);
  });

  it('agrees in sign with a comparison of the UTF-8 bytes, for any well-formed strings', () => {
    const key = fc.string({ unit: 'binary', maxLength: 6 });
    fc.assert(
      fc.property(key, key, (a, b) => {
        expect(Math.sign(compareKeys(a, b))).toBe(Math.sign(byteOrder(a, b)));
      }),
      { numRuns: 2000 },
    );
  });
});
