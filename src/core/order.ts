// Code units from U+E000 to U+FFFF sort above the surrogates (U+D800–U+DFFF) in UTF-16, but
// below every supplementary code point those surrogates encode. Shifting them down by 0x800 and
// the surrogates up by 0x2000 turns UTF-16 unit order into code point order.
function codePointRank(unit: number): number {
  if (unit >= 0xd800 && unit <= 0xdfff) return unit + 0x2000;
  if (unit >= 0xe000) return unit - 0x800;
  return unit;
}

/**
 * Compares two keys by Unicode code point, which is the byte order of their UTF-8 encoding: the
 * order SQLite's BINARY and PostgreSQL's "C" collation give. JavaScript's default string order
 * compares UTF-16 units instead and puts `'\u{1F600}'` before `'\uFF5E'`.
 *
 * @returns a negative number, zero or a positive number, as `Array.prototype.sort` expects
 * @example
 * ```ts
 * ['\u{1F600}', '\uFF5E', 'a'].sort(compareKeys); // ['a', '\uFF5E', '\u{1F600}']
 * ```
 */
export function compareKeys(a: string, b: string): number {
  const length = Math.min(a.length, b.length);
  for (let index = 0; index < length; index++) {
    const x = a.charCodeAt(index);
    const y = b.charCodeAt(index);
    if (x !== y) return codePointRank(x) - codePointRank(y);
  }
  return a.length - b.length;
}
