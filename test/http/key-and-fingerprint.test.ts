import fc from 'fast-check';
import { afterAll, describe, expect, it } from 'vitest';
import { canonicalJsonText, canonicalNumber } from '../../src/core/canonical-json.js';
import { canonicalJson } from '../../src/http/fingerprint.js';
import {
  BodyRefusedError,
  fingerprintPath,
  idempotent,
  MAX_KEY_LENGTH,
  parseIdempotencyKey,
  requestFingerprint,
  storedId,
} from '../../src/http/index.js';
import { InvalidOptionError, MAX_LEASE_SECONDS } from '../../src/index.js';
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
    ["~!#$%&'()*+-./:;<=>?@[\\]^_`{|}", "~!#$%&'()*+-./:;<=>?@[\\]^_`{|}"],
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
    ['a,b'],
    ['"a,b"'],
    ['"a, b"'],
    ['k1,'],
    ['k1, '],
    ['k'.repeat(MAX_KEY_LENGTH + 1)],
  ])('refuses %j', (header) => {
    const parsed = parseIdempotencyKey(header);
    expect(parsed.ok).toBe(false);
    if (!parsed.ok) expect(parsed.reason).toMatch(/\w/);
  });

  it('reads back every printable ASCII key but the comma written as a Structured Field string', () => {
    fc.assert(
      fc.property(
        fc.string({
          unit: fc
            .integer({ min: 0x20, max: 0x7e })
            .filter((c) => c !== 0x2c)
            .map((c) => String.fromCharCode(c)),
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
  it('is a SHA-256 hex fingerprint that ignores key order and number spelling', () => {
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

  it('gives a JSON body, as text or parsed, the fingerprint 0.1.0 gave', () => {
    // sha256 of the canonicalize package's output for { method, path, body }, as 0.1.0 computed it.
    const fingerprint = '0842de6cab301fe2617a94f7661f79121f119b834513785dc6f72690b0b303f3';
    const body = { amount: 1000, currency: 'EUR', meta: { b: [1, 2.5], a: 'x' } };
    expect(requestFingerprint(request(body))).toBe(fingerprint);
    expect(requestFingerprint(request(JSON.stringify(body, null, 2)))).toBe(fingerprint);
    expect(requestFingerprint(request(Buffer.from(JSON.stringify(body))))).toBe(fingerprint);
  });

  it('reads JSON text as written: numbers with every digit, every member, 1e400', () => {
    const of = (text: string) => requestFingerprint(request(text));
    expect(of('{"acct":12345678901234567891}')).not.toBe(of('{"acct":12345678901234567892}'));
    expect(of('{"amt":0.30000000000000000001}')).not.toBe(of('{"amt":0.3}'));
    expect(of('{"amt":1,"amt":2}')).not.toBe(of('{"amt":2}'));
    expect(of('{"a":1e400}')).toBe(of('{"a":1E+400}'));
    expect(of('{"a":1e400}')).not.toBe(of('{"a":1e401}'));
    expect(of('\ufeff{"a":1}')).toBe(of('{"a":1}'));
    // Not JSON: its exact bytes, never a JSON body's fingerprint.
    expect(of('{"a":1')).not.toBe(of('{"a":1}'));
  });

  it('normalises the path by RFC 3986 before hashing it', () => {
    const at = (path: string) => requestFingerprint(request({ a: 1 }, 'POST', path));
    expect(at('/p%61y')).toBe(at('/pay'));
    expect(at('/a%2fb')).toBe(at('/a%2Fb'));
    expect(at('/a%2Fb')).not.toBe(at('/a/b'));
  });
});

describe('fingerprintPath', () => {
  it.each([
    ['/pay', '/pay'],
    ['/p%61y', '/pay'],
    ['/%7e%2D%5f%2e', '/~-_.'],
    ['/a%2fb', '/a%2Fb'],
    ['/a%252Fb', '/a%252Fb'],
    ['/a{b}|c', '/a%7Bb%7D%7Cc'],
    ['/caf\u00e9', '/caf%C3%A9'],
    ['/100%', '/100%25'],
    ['/a/./b/../c', '/a/c'],
    ['/%2e%2e/x', '/x'],
    ['/a/b/.', '/a/b/'],
    ['/a/..', '/'],
  ])('writes %j as %j', (path, normal) => {
    expect(fingerprintPath(path)).toBe(normal);
  });

  it('agrees with what a Fetch URL makes of a path, once normalised', () => {
    fc.assert(
      fc.property(fc.webPath(), (path) => {
        fc.pre(path.startsWith('/'));
        const parsed = new URL(`http://h${path}`).pathname;
        expect(fingerprintPath(parsed)).toBe(fingerprintPath(path));
      }),
    );
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
    ['storeStreams as a string', { storeStreams: 'no' }],
    ['streamRecordAfterSeconds 0', { streamRecordAfterSeconds: 0 }],
    ['streamRecordAfterSeconds NaN', { streamRecordAfterSeconds: Number.NaN }],
    ['streamRecordAfterSeconds as a string', { streamRecordAfterSeconds: '60' }],
    ['streamRecordAfterSeconds past 7 days', { streamRecordAfterSeconds: MAX_LEASE_SECONDS + 1 }],
  ])('refuses %s when the layer is built', (_name, options) => {
    expect(() => idempotent(store, options as never)).toThrow(InvalidOptionError);
  });

  it('names streamRecordAfterSeconds when it refuses it', () => {
    expect(() => idempotent(store, { streamRecordAfterSeconds: -1 })).toThrow(
      /^streamRecordAfterSeconds must be a number of seconds above 0 and at most 604800 \(7 days\), got number -1$/,
    );
  });

  it('takes a stream bound from a fraction of a second up to 7 days', () => {
    for (const streamRecordAfterSeconds of [0.05, 300, MAX_LEASE_SECONDS]) {
      expect(idempotent(store, { streamRecordAfterSeconds }).begin).toBeTypeOf('function');
    }
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

// RFC 8785 written the plain way, recursively, to check the library's stack-based walks against.
function reference(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(reference).join(',')}]`;
  if (value !== null && typeof value === 'object') {
    const record = value as Record<string, unknown>;
    const members = Object.keys(record)
      .sort()
      .map((key) => `${JSON.stringify(key)}:${reference(record[key])}`);
    return `{${members.join(',')}}`;
  }
  return JSON.stringify(value);
}

describe('canonicalJson', () => {
  it('writes RFC 8785 canonical JSON for any JSON value', () => {
    fc.assert(
      fc.property(fc.jsonValue(), (value) => {
        expect(canonicalJson(value)).toBe(reference(value));
      }),
    );
    expect(canonicalJson({ b: [1.0, -0, 1e21, 1e-7], a: 'é\u2028', c: undefined })).toBe(
      '{"a":"é\u2028","b":[1,0,1e+21,1e-7]}',
    );
  });

  it("calls each value's toJSON once, as JSON.stringify does", () => {
    const calls: string[] = [];
    const stamp = (name: string) => ({ toJSON: () => calls.push(name) && name });
    expect(canonicalJson({ b: stamp('b'), a: [stamp('a')] })).toBe('{"a":["a"],"b":"b"}');
    expect(calls.sort()).toEqual(['a', 'b']);
  });

  it('writes deep values and toJSON values alike wherever they sit, calling a toJSON that throws first', () => {
    let deep: unknown = { toJSON: () => ({ z: 1, a: [2] }) };
    let expected = '{"a":[2],"z":1}';
    for (let level = 0; level < 200; level++) {
      deep = { b: [level], a: deep };
      expected = `{"a":${expected},"b":[${level}]}`;
    }
    expect(canonicalJson(deep)).toBe(expected);
    const thrown = new Error('toJSON failed');
    const value = {
      a: Number.NaN,
      b: {
        toJSON: () => {
          throw thrown;
        },
      },
    };
    expect(() => canonicalJson(value)).toThrow(thrown);
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

describe('canonicalJsonText', () => {
  it('gives what canonicalJson gives for the parsed value, for any JSON text', () => {
    fc.assert(
      fc.property(fc.jsonValue(), fc.constantFrom(0, 1, '\t'), (value, space) => {
        const text = JSON.stringify(value, null, space);
        expect(canonicalJsonText(text)).toBe(canonicalJson(value));
      }),
    );
  });

  it('takes exactly the texts JSON.parse takes (and a leading byte order mark)', () => {
    const texts = fc.oneof(
      fc.json(),
      fc.string(),
      fc
        .json()
        .chain((text) => fc.integer({ min: 0, max: text.length }).map((cut) => text.slice(0, cut))),
      fc.constantFrom(
        '01',
        '-',
        '1.',
        '.5',
        '1e',
        '+1',
        '[1,]',
        '{"a":1,}',
        'tru',
        '"\\x"',
        '"\t"',
      ),
    );
    fc.assert(
      fc.property(texts, (text) => {
        let parses = true;
        try {
          JSON.parse(text);
        } catch {
          parses = false;
        }
        expect(canonicalJsonText(text) !== undefined).toBe(parses);
        if (parses) expect(canonicalJsonText(`\ufeff${text}`)).toBe(canonicalJsonText(text));
      }),
      { numRuns: 2000 },
    );
  });

  it('keeps every member, in the order they came among one name', () => {
    expect(canonicalJsonText('{"b":1,"a":2,"b":3,"a":1}')).toBe('{"a":2,"a":1,"b":1,"b":3}');
    expect(canonicalJsonText('{"\\u0041":1}')).toBe('{"A":1}');
    expect(canonicalJsonText('["\\ud800"]')).toBe('["\\ud800"]');
  });

  it('reads 100,000 levels of nesting without overflowing the stack', () => {
    const text = `${'[{"a":'.repeat(50_000)}1${'}]'.repeat(50_000)}`;
    expect(canonicalJsonText(text)).toBe(text);
  });
});

describe('canonicalNumber', () => {
  it('writes a double as RFC 8785 does, whatever form its shortest digits come in', () => {
    fc.assert(
      fc.property(fc.double({ noNaN: true, noDefaultInfinity: true }), (x) => {
        const written = String(x);
        expect(canonicalNumber(JSON.stringify(x))).toBe(written);
        expect(canonicalNumber(x.toExponential().replace('e+', 'e'))).toBe(written);
      }),
    );
  });

  it('writes a short decimal as its exact value, like any other spelling of it', () => {
    const decimal = fc
      .tuple(
        fc.boolean(),
        fc.stringMatching(/^(?:0|[1-9]\d{0,7})$/),
        fc.stringMatching(/^\d{1,8}$/),
      )
      .map(([negative, whole, fraction]) => `${negative ? '-' : ''}${whole}.${fraction}`);
    fc.assert(
      fc.property(decimal, (text) => {
        expect(canonicalNumber(text)).toBe(canonicalNumber(`${text}e0`));
        expect(canonicalNumber(text)).toBe(canonicalNumber(`${text}000e-0`));
      }),
    );
  });

  it.each([
    ['1.0', '1'],
    ['100e-2', '1'],
    ['-0.0e5', '0'],
    ['0.30000000000000000001', '0.30000000000000000001'],
    // 17 characters, 16 digits: more than a double keeps, which would round it to …897.
    ['70000000.09559896', '70000000.09559896'],
    ['-7000000.09559896', '-7000000.09559896'],
    ['1234567890123456', '1234567890123456'],
    ['12345678901234567891', '12345678901234567891'],
    ['123456789012345678901234', '1.23456789012345678901234e+23'],
    ['1e400', '1e+400'],
    ['-2.50E-400', '-2.5e-400'],
    ['0.000001', '0.000001'],
    ['0.0000001', '1e-7'],
    ['1e21', '1e+21'],
    ['1e99999999999999999999', '1e+99999999999999999999'],
    // Exponents past 15 digits are added up as decimal text: a carry and a borrow across them.
    ['12.5e99999999999999999999', '1.25e+100000000000000000000'],
    ['0.0125e-10000000000000000', '1.25e-10000000000000002'],
    ['123.4e-1000000000000000000', '1.234e-999999999999999998'],
    ['0.00001e10000000000000000', '1e+9999999999999995'],
    ['1e+000000000000000000000021', '1e+21'],
    ['-1e-0000000000000000000000000007', '-1e-7'],
  ])('writes %s as %s', (text, written) => {
    expect(canonicalNumber(text)).toBe(written);
  });
});
