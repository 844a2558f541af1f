// The library's one canonical JSON (RFC 8785, JCS): object members sorted by the UTF-16 code units
// of their names, numbers written as ECMAScript's Number::toString writes them, strings as
// JSON.stringify writes them, no whitespace. Two entry points share that output: `canonicalJson`
// walks a JavaScript value, `canonicalJsonText` reads JSON text. Both keep an explicit stack
// rather than recursing, so no nesting depth can overflow the call stack; `canonicalJson` writes
// plain data of bounded depth by recursion first, the common case, and leaves the rest to its walk.

// What an entry of the value walk's stack holds (kept in two parallel arrays, so the walk
// allocates nothing per value): text to write as is, a value to write (its `toJSON` already
// applied, so that runs once per value), or an object whose members are all written, leaving the
// ancestors' set.
const TEXT = 0;
const VALUE = 1;
const LEAVE = 2;
type Entry = typeof TEXT | typeof VALUE | typeof LEAVE;

function resolved(value: unknown): unknown {
  const toJSON = (value as { toJSON?: unknown } | null | undefined)?.toJSON;
  return typeof toJSON === 'function' ? toJSON.call(value) : value;
}

// How deep the recursive writer goes before it leaves a value to the walk: far below any call
// stack's limit, far above what a request body nests.
const FAST_DEPTH = 64;

function hasToJSON(value: unknown): boolean {
  return (
    value !== null &&
    value !== undefined &&
    typeof (value as { toJSON?: unknown }).toJSON === 'function'
  );
}

// The canonical text of plain data (no `toJSON` anywhere, nesting at most `depth`) written by
// recursion, which allocates no stack entries; `undefined` leaves the value to the walk, which
// then starts over. It calls nothing of the value's (no `toJSON`) and it checks every member of a
// container for `toJSON` before writing any of them, so it bails out before any error the walk
// would meet first (a `toJSON` that throws), and each error it raises is the one the walk raises
// first. A cycle nests without end and is left to the walk, which names it.
function plainText(
  value: unknown,
  depth: number,
  refuse: (reason: string) => never,
): string | undefined {
  switch (typeof value) {
    case 'string':
      return JSON.stringify(value);
    case 'number':
      if (!Number.isFinite(value)) refuse(`the number ${value} is not JSON`);
      return String(value);
    case 'boolean':
      return value ? 'true' : 'false';
    case 'bigint':
      // A BigInt given a `toJSON` (a common patch) is the walk's to write.
      return hasToJSON(value) ? undefined : refuse('a BigInt is not JSON');
    case 'undefined':
    case 'function':
    case 'symbol':
      return 'null';
  }
  if (value === null) return 'null';
  if (depth === 0) return undefined;
  if (Array.isArray(value)) {
    const items = value as readonly unknown[];
    for (let index = 0; index < items.length; index++) {
      if (hasToJSON(items[index])) return undefined;
    }
    let out = '[';
    for (let index = 0; index < items.length; index++) {
      const item = plainText(items[index], depth - 1, refuse);
      if (item === undefined) return undefined;
      out += index > 0 ? `,${item}` : item;
    }
    return `${out}]`;
  }
  const record = value as Record<string, unknown>;
  const keys = Object.keys(record).sort();
  const members: unknown[] = [];
  for (const key of keys) {
    const member = record[key];
    if (hasToJSON(member)) return undefined;
    members.push(member);
  }
  let out = '{';
  for (let index = 0; index < keys.length; index++) {
    const member = members[index];
    const kind = typeof member;
    if (kind === 'undefined' || kind === 'function' || kind === 'symbol') continue;
    const text = plainText(member, depth - 1, refuse);
    if (text === undefined) return undefined;
    out += `${out.length > 1 ? ',' : ''}${JSON.stringify(keys[index])}:${text}`;
  }
  return `${out}}`;
}

/**
 * The RFC 8785 canonical JSON text of a JavaScript value, as `JSON.stringify` would see it
 * (`toJSON` applied, `undefined`, functions and symbols left out of objects and written as `null`
 * in arrays). Numbers are JavaScript numbers: `1.0` and `1` are one number, and so are two decimal
 * texts that round to the same double. A string with a lone surrogate is written with it escaped
 * (`"\ud800"`), as `JSON.stringify` does, so it never collides with another string.
 *
 * @param root - the value to write
 * @param refuse - called with the reason for a value JSON cannot represent (a non-finite number,
 *   a BigInt, a cycle); it throws the caller's error
 */
export function canonicalJson(root: unknown, refuse: (reason: string) => never): string {
  if (!hasToJSON(root)) {
    const plain = plainText(root, FAST_DEPTH, refuse);
    if (plain !== undefined) return plain;
  }
  return walk(root, refuse);
}

// The canonical text of any value, with an explicit stack: every `toJSON`, any depth, cycles named.
function walk(root: unknown, refuse: (reason: string) => never): string {
  let out = '';
  const ancestors = new Set<object>();
  const entries: Entry[] = [VALUE];
  const items: unknown[] = [resolved(root)];
  for (let entry = entries.pop(); entry !== undefined; entry = entries.pop()) {
    const value = items.pop();
    if (entry === TEXT) {
      out += value as string;
      continue;
    }
    if (entry === LEAVE) {
      ancestors.delete(value as object);
      continue;
    }
    switch (typeof value) {
      case 'string':
        out += JSON.stringify(value);
        continue;
      case 'number':
        if (!Number.isFinite(value)) refuse(`the number ${value} is not JSON`);
        // ECMAScript's Number::toString, which RFC 8785 prescribes (and -0 as 0).
        out += String(value);
        continue;
      case 'boolean':
        out += value ? 'true' : 'false';
        continue;
      case 'bigint':
        return refuse('a BigInt is not JSON');
      case 'undefined':
      case 'function':
      case 'symbol':
        out += 'null';
        continue;
    }
    if (value === null) {
      out += 'null';
      continue;
    }
    const object = value as object;
    if (ancestors.has(object)) refuse('it contains a cycle');
    ancestors.add(object);
    entries.push(LEAVE, TEXT);
    items.push(object);
    if (Array.isArray(object)) {
      items.push(']');
      for (let index = object.length - 1; index >= 0; index--) {
        entries.push(VALUE);
        items.push(resolved(object[index]));
        if (index > 0) {
          entries.push(TEXT);
          items.push(',');
        }
      }
      out += '[';
    } else {
      items.push('}');
      const record = object as Record<string, unknown>;
      const keys = Object.keys(record).sort();
      // Members JSON.stringify leaves out (undefined, functions, symbols) are skipped; the first
      // one written goes without a comma, so the members are pushed last first.
      const members: [string, unknown][] = [];
      for (const key of keys) {
        const member = resolved(record[key]);
        const kind = typeof member;
        if (kind !== 'undefined' && kind !== 'function' && kind !== 'symbol') {
          members.push([key, member]);
        }
      }
      for (let index = members.length - 1; index >= 0; index--) {
        const [key, member] = members[index] as [string, unknown];
        entries.push(VALUE, TEXT);
        items.push(member, `${index > 0 ? ',' : ''}${JSON.stringify(key)}:`);
      }
      out += '{';
    }
  }
  return out;
}

// An array being read: the canonical text of each item so far.
interface ArrayFrame {
  readonly members: null;
  readonly items: string[];
}

// An object being read: its members so far (the name, for sorting, and the canonical
// `"name":value` text), whether they came in order, and the member whose value comes next.
interface ObjectFrame {
  readonly members: [string, string][];
  sorted: boolean;
  name: string;
  written: string;
}

type Frame = ArrayFrame | ObjectFrame;

const NUMBER = /-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?/y;
// Integers of up to 15 digits: written as they are (except -0), the common case.
const SHORT_INTEGER = /^-?(?:0|[1-9]\d{0,14})$/;
const EXPONENT = /[eE]/;

// The digits of a JSON number text without an exponent: its characters but the sign and point.
function countDigits(text: string): number {
  return text.length - (text.startsWith('-') ? 1 : 0) - (text.includes('.') ? 1 : 0);
}

// Decimal digits a double holds exactly, whatever they are.
const EXACT_DIGITS = 15;
const EXACT_LIMIT = 10 ** EXACT_DIGITS;

// An exponent's text (`+12`, `-0004`, or '' for none) as its sign and its digits without leading
// zeros ('0' for zero).
function readExponent(text: string): { negative: boolean; magnitude: string } {
  const negative = text.startsWith('-');
  let at = negative || text.startsWith('+') ? 1 : 0;
  while (at < text.length - 1 && text.charCodeAt(at) === 0x30) at++;
  return { negative, magnitude: at < text.length ? text.slice(at) : '0' };
}

// The decimal text `digits` (more than EXACT_DIGITS digits, no leading zero) plus `delta`
// (|delta| < 10^15, so the sum keeps its sign): the low digits are added as a number, and a carry
// or a borrow walks into the high digits, in time linear in their count.
function addToMagnitude(digits: string, delta: number): string {
  let high = digits.slice(0, -EXACT_DIGITS);
  let low = Number(digits.slice(-EXACT_DIGITS)) + delta;
  const step = low >= EXACT_LIMIT ? 1 : low < 0 ? -1 : 0;
  if (step !== 0) {
    low -= step * EXACT_LIMIT;
    const carried = step === 1 ? 0x39 : 0x30;
    let at = high.length - 1;
    while (at >= 0 && high.charCodeAt(at) === carried) at--;
    const rest = (step === 1 ? '0' : '9').repeat(high.length - 1 - at);
    const digit = at < 0 ? 0 : high.charCodeAt(at) - 0x30;
    high = `${high.slice(0, Math.max(at, 0))}${at < 0 ? '1' : String(digit + step)}${rest}`;
    if (high.startsWith('0')) high = high.slice(1);
  }
  if (high === '') return String(low);
  return `${high}${String(low).padStart(EXACT_DIGITS, '0')}`;
}

/**
 * The canonical text of a JSON number text, exactly: its decimal value written the way
 * ECMAScript's Number::toString writes a number (no trailing zeros, `e+21` from 10^21 up,
 * `e-7` from below 10^-6 down, `-0` as `0`), but with every digit the text has. So `1.0`, `1e0`
 * and `1` are one number; `0.30000000000000000001` and `0.3`, or `12345678901234567891` and
 * `12345678901234567892`, which `JSON.parse` rounds to one double, are not; and `1e400` is
 * `1e+400` instead of Infinity. A text that is a double's shortest form gives what RFC 8785
 * gives for that double.
 */
export function canonicalNumber(text: string): string {
  if (SHORT_INTEGER.test(text)) return text === '-0' ? '0' : text;
  // At most 15 digits and no exponent: a double holds such a decimal exactly enough that its
  // shortest form is that decimal (DBL_DIG is 15), so Number::toString writes it, much faster.
  // The digits are counted, not the characters: `70000000.09559896` is 17 characters but 16
  // digits, which a double rounds (to `70000000.09559897`).
  if (!EXPONENT.test(text) && countDigits(text) <= 15) return String(Number(text));
  const negative = text.startsWith('-');
  const unsigned = negative ? text.slice(1) : text;
  const exponentAt = unsigned.search(EXPONENT);
  const mantissa = exponentAt < 0 ? unsigned : unsigned.slice(0, exponentAt);
  const point = mantissa.indexOf('.');
  const whole = point < 0 ? mantissa : mantissa.slice(0, point);
  const all = point < 0 ? mantissa : whole + mantissa.slice(point + 1);
  // The zeros are counted by a walk in from each end: `/0+$/` retries from every zero of a run that
  // a later digit ends (`1`, 40,000 zeros, `1`), which is quadratic in a body the client sends.
  let first = 0;
  while (first < all.length && all.charCodeAt(first) === 0x30) first++;
  let last = all.length;
  while (last > first && all.charCodeAt(last - 1) === 0x30) last--;
  const digits = all.slice(first, last);
  if (digits === '') return '0';
  const head = digits.length === 1 ? digits : `${digits[0]}.${digits.slice(1)}`;
  // Where the point sits in the digits as written, before the exponent: bounded by the text's
  // length, so a double holds it exactly.
  const offset = whole.length - first;
  const exponent = readExponent(exponentAt < 0 ? '' : unsigned.slice(exponentAt + 1));
  let written: string;
  if (exponent.magnitude.length > EXACT_DIGITS) {
    // An exponent of 10^15 or more dwarfs the offset: the scientific form, its exponent added
    // up as decimal text (a BigInt of a million-digit exponent takes a second to read and write).
    const magnitude = addToMagnitude(
      exponent.magnitude,
      exponent.negative ? 1 - offset : offset - 1,
    );
    written = `${head}e${exponent.negative ? '-' : '+'}${magnitude}`;
  } else {
    const shift = Number(exponent.magnitude) * (exponent.negative ? -1 : 1);
    // The value is 0.<digits> × 10^position.
    const position = offset + shift;
    const count = digits.length;
    if (count <= position && position <= 21) {
      written = digits + '0'.repeat(position - count);
    } else if (0 < position && position <= 21) {
      written = `${digits.slice(0, position)}.${digits.slice(position)}`;
    } else if (-6 < position && position <= 0) {
      written = `0.${'0'.repeat(-position)}${digits}`;
    } else {
      const power = position - 1;
      written = `${head}e${power < 0 ? '-' : '+'}${Math.abs(power)}`;
    }
  }
  return negative ? `-${written}` : written;
}

function isSpace(code: number): boolean {
  return code === 0x20 || code === 0x0a || code === 0x0d || code === 0x09;
}

function compareMembers(a: [string, string], b: [string, string]): number {
  return a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0;
}

/**
 * The canonical text of JSON text (RFC 8259), read from the text itself rather than from
 * `JSON.parse`'s result, so nothing the parser would collapse is lost: numbers keep every digit
 * they are written with ({@link canonicalNumber}), and an object's members are all kept, a name
 * that occurs twice included (sorted by name, members of one name in the order they came), so
 * `{"a":1,"a":2}` is neither `{"a":2}` nor `{"a":2,"a":1}`. Strings count as the text they
 * denote (`"\u0041"` is `"A"`). A leading byte order mark is ignored, as RFC 8259 allows. For
 * JSON text free of those cases (numbers in a double's shortest form, names unique) the result is
 * what {@link canonicalJson} gives for the parsed value.
 *
 * @returns the canonical text, or `undefined` when `source` is not JSON text
 */
export function canonicalJsonText(source: string): string | undefined {
  const text = source.charCodeAt(0) === 0xfeff ? source.slice(1) : source;
  const end = text.length;
  let at = 0;
  const skipSpace = () => {
    while (at < end && isSpace(text.charCodeAt(at))) at++;
  };
  // The string starting at `at` (a double quote): `decoded` is the text it denotes, `written` its
  // canonical form; `at` moves past it. False when it is not a JSON string.
  let decoded = '';
  let written = '';
  const readString = (): boolean => {
    let close = at + 1;
    let escaped = false;
    for (; close < end; close++) {
      const code = text.charCodeAt(close);
      if (code === 0x22) break;
      if (code === 0x5c) {
        escaped = true;
        close++;
      } else if (code < 0x20) {
        return false;
      }
    }
    if (close >= end) return false;
    const raw = text.slice(at, close + 1);
    at = close + 1;
    if (escaped) {
      try {
        decoded = JSON.parse(raw) as string;
      } catch {
        return false;
      }
      written = JSON.stringify(decoded);
    } else {
      decoded = raw.slice(1, -1);
      // Unescaped text is written as it came, unless it holds a lone surrogate (possible in a
      // string handed over as such, never in decoded UTF-8), which JSON.stringify escapes.
      written = decoded.isWellFormed() ? raw : JSON.stringify(decoded);
    }
    return true;
  };
  // The name of a member and its colon, at `at`.
  const readName = (): boolean => {
    if (text.charCodeAt(at) !== 0x22 || !readString()) return false;
    skipSpace();
    if (text.charCodeAt(at) !== 0x3a) return false;
    at++;
    skipSpace();
    return true;
  };
  const stack: Frame[] = [];
  skipSpace();
  for (;;) {
    // One value starts at `at`: a scalar is read whole, a container opens a frame.
    let value: string;
    const code = text.charCodeAt(at);
    if (code === 0x7b || code === 0x5b) {
      at++;
      skipSpace();
      const closer = code === 0x7b ? 0x7d : 0x5d;
      if (text.charCodeAt(at) === closer) {
        at++;
        value = code === 0x7b ? '{}' : '[]';
      } else if (code === 0x5b) {
        stack.push({ members: null, items: [] });
        continue;
      } else {
        if (!readName()) return undefined;
        stack.push({ members: [], sorted: true, name: decoded, written });
        continue;
      }
    } else if (code === 0x22) {
      if (!readString()) return undefined;
      value = written;
    } else if (code === 0x2d || (code >= 0x30 && code <= 0x39)) {
      NUMBER.lastIndex = at;
      const match = NUMBER.exec(text);
      if (match === null) return undefined;
      at += match[0].length;
      value = canonicalNumber(match[0]);
    } else if (text.startsWith('true', at)) {
      at += 4;
      value = 'true';
    } else if (text.startsWith('false', at)) {
      at += 5;
      value = 'false';
    } else if (text.startsWith('null', at)) {
      at += 4;
      value = 'null';
    } else {
      return undefined;
    }
    // The value is complete: hand it to the containers it closes, up to one that goes on.
    for (;;) {
      skipSpace();
      const frame = stack[stack.length - 1];
      if (frame === undefined) return at === end ? value : undefined;
      const next = text.charCodeAt(at);
      at++;
      if (frame.members === null) {
        frame.items.push(value);
        if (next === 0x2c) break;
        if (next !== 0x5d) return undefined;
        stack.pop();
        value = `[${frame.items.join(',')}]`;
        continue;
      }
      const { members } = frame;
      const previous = members[members.length - 1];
      if (previous !== undefined && previous[0] > frame.name) frame.sorted = false;
      members.push([frame.name, `${frame.written}:${value}`]);
      if (next === 0x2c) {
        skipSpace();
        if (!readName()) return undefined;
        frame.name = decoded;
        frame.written = written;
        break;
      }
      if (next !== 0x7d) return undefined;
      stack.pop();
      // A stable sort: members of one name stay in the order they came.
      if (!frame.sorted) members.sort(compareMembers);
      value = '{';
      for (let index = 0; index < members.length; index++) {
        value += `${index > 0 ? ',' : ''}${(members[index] as [string, string])[1]}`;
      }
      value += '}';
    }
    skipSpace();
  }
}
