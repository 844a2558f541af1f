import { InvalidArgumentError } from 'commander';
import { IdempotencyError } from '../core/errors.js';
import { storedId } from '../http/scope.js';

// The characters a key may hold and still be printed bare: no shell gives any of them a meaning
// in a word, and none moves a terminal's cursor or looks like another character.
const BARE = /^[A-Za-z0-9_@%+=:,./-]+$/;
// What storedId puts between a JSON-encoded scope and the key.
const SCOPE_SEPARATOR = '\u001f';

/**
 * A string as a JSON string literal holding only printable ASCII: every other UTF-16 code unit
 * (control characters, escape sequences, invisible and look-alike characters, NFC against NFD)
 * is written `\uXXXX`, and `'` too, so the literal can sit inside shell single quotes.
 * `JSON.parse` gives the exact string back.
 */
function asciiJsonString(text: string): string {
  let out = '"';
  for (let index = 0; index < text.length; index += 1) {
    const unit = text.charCodeAt(index);
    if (unit === 0x22) out += '\\"';
    else if (unit === 0x5c) out += '\\\\';
    else if (unit >= 0x20 && unit <= 0x7e && unit !== 0x27) out += text[index];
    else out += `\\u${unit.toString(16).padStart(4, '0')}`;
  }
  return `${out}"`;
}

/**
 * One word of a key as the CLI prints it: bare when it is only letters, digits and `_@%+=:,./-`
 * (and does not start with `-`), else its {@link asciiJsonString} in single quotes, which a shell
 * hands to `idem` as the JSON literal that {@link parseKeyWord} reads back.
 */
export function printableWord(text: string): string {
  if (BARE.test(text) && !text.startsWith('-')) return text;
  return `'${asciiJsonString(text)}'`;
}

/**
 * The scope and key a stored id was made of by `storedId`, when it was made so; `undefined` for
 * an id stored without a scope.
 */
export function splitStoredId(id: string): { scope: string; key: string } | undefined {
  const at = id.indexOf(SCOPE_SEPARATOR);
  if (!id.startsWith('"') || at < 0) return undefined;
  const head = id.slice(0, at);
  const key = id.slice(at + 1);
  let scope: unknown;
  try {
    scope = JSON.parse(head);
  } catch {
    return undefined;
  }
  if (typeof scope !== 'string' || key === '') return undefined;
  try {
    return storedId(scope, key) === id ? { scope, key } : undefined;
  } catch {
    return undefined;
  }
}

/**
 * A stored id as the arguments that name it again: `--scope SCOPE KEY` for a scoped id, `KEY`
 * otherwise, each word from {@link printableWord}. Pasted after `idem show` or `idem release`, it
 * names the same row; nothing in it can move the terminal's cursor or end a line.
 *
 * @example
 * ```ts
 * printableKey('order-42'); // 'order-42'
 * printableKey('"client-7"\u001forder-42'); // '--scope client-7 order-42'
 * printableKey('-x y'); // `'"-x y"'`, a JSON literal in single quotes
 * ```
 */
export function printableKey(id: string): string {
  const scoped = splitStoredId(id);
  if (scoped === undefined) return printableWord(id);
  return `--scope ${printableWord(scoped.scope)} ${printableWord(scoped.key)}`;
}

/**
 * Reads a key or scope argument: a whole JSON string literal (as {@link printableWord} prints one)
 * is decoded; anything else is taken as typed, so a raw stored id from `--json` output works too.
 *
 * @throws commander's `InvalidArgumentError` (a usage error) for an empty argument
 */
export function parseKeyWord(text: string): string {
  if (text.startsWith('"') && text.endsWith('"') && text.length >= 2) {
    try {
      const decoded: unknown = JSON.parse(text);
      if (typeof decoded === 'string') return nonEmpty(decoded);
    } catch {
      // Not a literal after all: the key is what was typed.
    }
  }
  return nonEmpty(text);
}

function nonEmpty(text: string): string {
  if (text === '') throw new InvalidArgumentError('expected a non-empty key.');
  return text;
}

/**
 * `--scope S`: read as {@link parseKeyWord}, and a scope the HTTP layer stores keys under (a
 * non-empty, well-formed string).
 *
 * @throws commander's `InvalidArgumentError` (a usage error) otherwise
 */
export function parseScopeWord(text: string): string {
  const scope = parseKeyWord(text);
  try {
    storedId(scope, 'k');
  } catch (error) {
    if (error instanceof IdempotencyError) throw new InvalidArgumentError(error.message);
    throw error;
  }
  return scope;
}

// Invisible characters that reorder or hide text: zero-width ones, bidirectional controls, line
// and paragraph separators, the BOM, interlinear annotations.
const HIDDEN: readonly (readonly [number, number])[] = [
  [0x200b, 0x200f],
  [0x2028, 0x202e],
  [0x2060, 0x206f],
  [0xfeff, 0xfeff],
  [0xfff9, 0xfffb],
];

function shownAsIs(point: number): boolean {
  if (point === 0x09 || point === 0x0a) return true;
  if (point < 0x20 || (point >= 0x7f && point < 0xa0)) return false;
  return !HIDDEN.some(([from, to]) => point >= from && point <= to);
}

/**
 * Text as a terminal may show it: printable characters, tabs and newlines stay; anything else (an
 * escape sequence, a carriage return, a C1 control, a bidirectional override, a zero-width
 * character) is written `\uXXXX`, so no byte of it can repaint the screen or hide what it says.
 */
export function terminalSafe(text: string): string {
  let out = '';
  for (const character of text) {
    const point = character.codePointAt(0) ?? 0;
    out += shownAsIs(point) ? character : asciiJsonString(character).slice(1, -1);
  }
  return out;
}
