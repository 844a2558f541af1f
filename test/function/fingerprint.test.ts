import { describe, expect, it } from 'vitest';
import { payloadFingerprint } from '../../src/function/index.js';
import { InvalidFingerprintError } from '../../src/index.js';

describe('payloadFingerprint', () => {
  it('gives the fingerprint 0.1.0 gave (canonicalize package) for a plain payload', () => {
    // sha256 of the canonicalize package's output for this payload, as 0.1.0 computed it.
    const payload = { to: 'ada@example.com', amount: 12.5, when: new Date(0) };
    expect(payloadFingerprint(payload)).toBe(
      '1fd261ddc8d763e69aec43ead60fe163df5206f58ed4f0f6ccbc1ff81fd44dcb',
    );
    expect(payloadFingerprint({ when: new Date(0), amount: 12.5, to: 'ada@example.com' })).toBe(
      payloadFingerprint(payload),
    );
  });

  it('counts numbers as JavaScript numbers and refuses what JSON cannot hold', () => {
    expect(payloadFingerprint({ n: 1.0 })).toBe(payloadFingerprint({ n: 1 }));
    expect(payloadFingerprint({ n: 0.1 + 0.2 })).not.toBe(payloadFingerprint({ n: 0.3 }));
    const cycle: Record<string, unknown> = {};
    cycle.self = cycle;
    for (const payload of [{ id: 1n }, { n: Number.NaN }, [Number.POSITIVE_INFINITY], cycle]) {
      expect(() => payloadFingerprint(payload)).toThrow(InvalidFingerprintError);
    }
    expect(payloadFingerprint({ id: String(2n ** 64n) })).not.toBe(
      payloadFingerprint({ id: String(2n ** 64n + 1n) }),
    );
  });

  it('leaves out members JSON leaves out, and counts no payload as the empty text', () => {
    expect(payloadFingerprint({ a: 1, skip: undefined, f: () => 1 })).toBe(
      payloadFingerprint({ a: 1 }),
    );
    expect(payloadFingerprint([() => 1])).toBe(payloadFingerprint([null]));
    expect(payloadFingerprint(undefined)).not.toBe(payloadFingerprint(null));
  });
});
