import canonicalize from 'canonicalize';
import fc from 'fast-check';
import { afterAll, describe, expect, it } from 'vitest';
import {
  BodyRefusedError,
  canonicalJson,
  idempotent,
  MAX_KEY_LENGTH,
  parseIdempotencyKey,
  requestFingerprint,
  storedId,
} from '../../src/http/index.js';
import { InvalidOptionError } from '../../src/index.js';
import { openSqliteStore } from '../../src/sqlite/index.js';

const request = (body: unknown, method = 'POST', path = '/payments') => ({
  method,
  path,
  headers: {},
  body,
});

describe('parseIdempotencyKey', () => {
  it.each([
    ['abc', 'abc'],
    ['"abc"', 'abc'],
    ['  "a b"\t', 'a b'],
    ['"a\\"b\\\\c"', 'a"b\\c'],
    ['8e03978e-40d5-43e8-bc93-6894a57f9324', '8e03978e-40d5-43e8-bc93-6894a57f9324'],
    ["~!#$%&'()*+,-./:;<=>?@[\\]^_`{|}", "~!#$%&'()*+,-./:;<=>?@[\\]^_`{|}"],
    ['k'.repeat(MAX_KEY_LENGTH), 'k'.repeat(MAX_KEY_LENGTH)],
  ])('accepts %j as the key %j', (header, key) => {
    expect(parseIdempotencyKey(header)).toEqual({ ok: true, key });
  });

  it.each([
    [''],
    ['   '],
    ['""'],
    ['a b'],
    ['"abc'],
    ['"a"b"'],
    ['"a";x=1'],
    ['"a\\nb"'],
    ['a\u0001b'],
    ['"a\u007fb"'],
    ['cl\u00e9'],
    ['a, b'],
    ['k'.repeat(MAX_KEY_LENGTH + 1)],
  ])('refuses %j', (header) => {
    const parsed = parseIdempotencyKey(header);
    expect(parsed.ok).toBe(false);
    if (!parsed.ok) expect(parsed.reason).toMatch(/\w/);
  });

  it('reads back every printable ASCII key written as a Structured Field string', () => {
    fc.assert(
      fc.property(
        fc.string({
          unit: fc.integer({ min: 0x20, max: 0x7e }).map((c) => String.fromCharCode(c)),
          minLength: 1,
          maxLength: MAX_KEY_LENGTH,
        }),
        (key) => {
          const header = `"${key.replace(/["\\]/g, '\\$&')}"`;
          expect(parseIdempotencyKey(header)).toEqual({ ok: true, key });
        },
      ),
    );
  });
});

describe('storedId', () => {
  it('keeps the key itself when unscoped', () => {
    expect(storedId(undefined, 'order-42')).toBe('order-42');
  });

  it('never gives two (scope, key) pairs the same id', () => {
    const ids = new Set([
      storedId('a:b', 'c'),
      storedId('a', 'b:c'),
      storedId(undefined, 'a:b:c'),
      storedId('a"', 'b'),
      storedId('a', '"b'),
      storedId('a\u001f"', 'b'),
    ]);
    expect(ids.size).toBe(6);
    fc.assert(
      fc.property(
        fc.string({ minLength: 1 }),
        fc.string({ minLength: 1 }),
        fc.string({ minLength: 1 }),
        fc.string({ minLength: 1 }),
        (s1, k1, s2, k2) => {
          fc.pre(s1.isWellFormed() && s2.isWellFormed() && (s1 !== s2 || k1 !== k2));
          const printable = (k: string) => k.replace(/[^\x20-\x7e]/g, 'x');
          const key1 = printable(k1);
          const key2 = printable(k2);
          fc.pre(s1 !== s2 || key1 !== key2);
          expect(storedId(s1, key1)).not.toBe(storedId(s2, key2));
        },
      ),
    );
  });

  it('refuses an empty scope', () => {
    expect(() => storedId('', 'k')).toThrow(InvalidOptionError);
  });
});

describe('requestFingerprint', () => {
  it('is a SHA-256 hex digest that ignores key order and number spelling', () => {
    const a = requestFingerprint(request({ amount: 1, nested: { x: [1, { b: 2, a: 1 }] } }));
    const b = requestFingerprint(request({ nested: { x: [1.0, { a: 1, b: 2 }] }, amount: 1 }));
    expect(a).toMatch(/^[0-9a-f]{64}$/);
    expect(a).toBe(b);
  });

  it('changes with the method, the path and the body', () => {
    const base = requestFingerprint(request({ amount: 1 }));
    expect(requestFingerprint(request({ amount: 1 }, 'post'))).toBe(base);
    expect(requestFingerprint(request({ amount: 1 }, 'PATCH'))).not.toBe(base);
    expect(requestFingerprint(request({ amount: 1 }, 'POST', '/refunds'))).not.toBe(base);
    expect(requestFingerprint(request({ amount: 2 }))).not.toBe(base);
    expect(requestFingerprint(request([1, 2]))).not.toBe(requestFingerprint(request([2, 1])));
  });

  it('refuses a body canonical JSON cannot represent', () => {
    expect(() => requestFingerprint(request({ amount: Number.NaN }))).toThrow(BodyRefusedError);
  });
});

describe('idempotent options', () => {
  const store = openSqliteStore(':memory:');
  afterAll(() => store.close());

  it.each([
    ['ttlSeconds 0', { ttlSeconds: 0 }],
    ['ttlSeconds NaN', { ttlSeconds: Number.NaN }],
    ['ttlSeconds as a string', { ttlSeconds: '60' }],
    ['retryAfterSeconds 1.5', { retryAfterSeconds: 1.5 }],
    ['a negative wait', { wait: { timeoutMs: -1 } }],
    ['a zero poll interval', { wait: { timeoutMs: 100, intervalMs: 0 } }],
    ['methods not an array', { methods: 'POST' }],
    ['storedHeaders with an empty name', { storedHeaders: [''] }],
    ['now not a function', { now: 5 }],
    ['required as a string', { required: 'yes' }],
    ['a clock in milliseconds', { now: () => Date.now() }],
    ['a clock absurdly far ahead', { now: () => 1e23 }],
    ['a clock giving NaN', { now: () => Number.NaN }],
    ['a clock giving a string', { now: () => '1700000000' }],
    [
      'a clock that throws',
      {
        now: () => {
          throw new Error('no clock');
        },
      },
    ],
    ['maxStoredBytes -1', { maxStoredBytes: -1 }],
    ['leaseSeconds 0', { leaseSeconds: 0 }],
    ['leaseSeconds Infinity', { leaseSeconds: Number.POSITIVE_INFINITY }],
    ['maxStoredBytes 1.5', { maxStoredBytes: 1.5 }],
    ['onOutcome not a function', { onOutcome: 'log' }],
  ])('refuses %s when the layer is built', (_name, options) => {
    expect(() => idempotent(store, options as never)).toThrow(InvalidOptionError);
  });

  it('accepts a seconds clock, a test clock at 0 and maxStoredBytes Infinity', () => {
    for (const options of [
      { now: () => Date.now() / 1000 },
      { now: () => 0, maxStoredBytes: Number.POSITIVE_INFINITY },
      { maxStoredBytes: 0 },
    ]) {
      expect(idempotent(store, options).begin).toBeTypeOf('function');
    }
  });
});

describe('canonicalJson', () => {
  it('writes what the canonicalize package writes, for any JSON value', () => {
    fc.assert(
      fc.property(fc.jsonValue(), (value) => {
        expect(canonicalJson(value)).toBe(canonicalize(value));
      }),
    );
  });

  it('walks 100,000 levels of nesting without overflowing the stack', () => {
    const text = `${'['.repeat(100_000)}${']'.repeat(100_000)}`;
    expect(canonicalJson(JSON.parse(text))).toBe(text);
  });

  it('refuses a cycle, a BigInt and non-finite numbers', () => {
    const cycle: Record<string, unknown> = {};
    cycle.self = cycle;
    for (const value of [cycle, { n: 1n }, [Number.POSITIVE_INFINITY]]) {
      expect(() => canonicalJson(value)).toThrow(BodyRefusedError);
    }
  });
});
