import { InvalidOptionError } from './errors.js';

/** The most pointers one `ignore` list takes. */
export const MAX_IGNORED_POINTERS = 64;
/** The most reference tokens one pointer holds: the deepest member it can leave out. */
export const MAX_POINTER_DEPTH = 32;

// The pointers of one `ignore` list, as a tree of their reference tokens: a node with `leaf` set
// is left out whole, with children it is walked into.
interface PointerNode {
  leaf: boolean;
  readonly children: Map<string, PointerNode>;
}

/** The JSON pointers (RFC 6901) whose members are left out of a body before it is digested. */
export interface IgnoredMembers {
  readonly root: PointerNode;
}

// RFC 6901 §3: `~` only as `~0` or `~1`; a pointer is empty or starts with `/`.
function tokens(pointer: string): string[] | string {
  if (pointer === '') return 'the empty pointer is the whole body; leave out members, not the body';
  if (!pointer.startsWith('/')) return 'a JSON pointer starts with "/"';
  if (/~(?![01])/.test(pointer)) return '"~" is written only as "~0" (for "~") or "~1" (for "/")';
  if (!pointer.isWellFormed()) return 'it holds a lone UTF-16 surrogate';
  const parts = pointer
    .slice(1)
    .split('/')
    .map((token) => token.replaceAll('~1', '/').replaceAll('~0', '~'));
  if (parts.length > MAX_POINTER_DEPTH) {
    return `it is ${parts.length} members deep; at most ${MAX_POINTER_DEPTH} are followed`;
  }
  return parts;
}

/**
 * Checks an `ignore` list of JSON pointers (RFC 6901: `/meta/traceId`, `/items/0/at`, `~1` for a
 * `/` in a name and `~0` for a `~`) and compiles it.
 *
 * @param name - the option's name, for the message
 * @throws {@link InvalidOptionError} naming the first pointer that is not one, or for a list that
 * is
 *   not an array of at most {@link MAX_IGNORED_POINTERS} strings
 */
export function readIgnoredMembers(list: unknown, name: string): IgnoredMembers {
  if (!Array.isArray(list)) {
    throw new InvalidOptionError(
      `${name} must be an array of JSON pointers such as "/meta/traceId"`,
    );
  }
  if (list.length > MAX_IGNORED_POINTERS) {
    throw new InvalidOptionError(
      `${name} holds ${list.length} pointers; at most ${MAX_IGNORED_POINTERS} are taken`,
    );
  }
  const root: PointerNode = { leaf: false, children: new Map() };
  for (const pointer of list as unknown[]) {
    if (typeof pointer !== 'string') {
      throw new InvalidOptionError(`${name} must hold strings, got ${typeof pointer}`);
    }
    const parts = tokens(pointer);
    if (typeof parts === 'string') {
      throw new InvalidOptionError(
        `${name} holds ${JSON.stringify(pointer)}, which is not a JSON pointer: ${parts}`,
      );
    }
    let node = root;
    for (const part of parts) {
      let child = node.children.get(part);
      if (child === undefined) {
        child = { leaf: false, children: new Map() };
        node.children.set(part, child);
      }
      node = child;
    }
    node.leaf = true;
  }
  return { root };
}

// The index just past the JSON value that starts at `at` in canonical JSON text (no whitespace),
// by a scan that keeps a depth count rather than recursing.
function valueEnd(text: string, at: number): number {
  let depth = 0;
  let index = at;
  for (;;) {
    const code = text.charCodeAt(index);
    if (code === 0x22) {
      index++;
      while (text.charCodeAt(index) !== 0x22) index += text.charCodeAt(index) === 0x5c ? 2 : 1;
      index++;
    } else if (code === 0x7b || code === 0x5b) {
      depth++;
      index++;
    } else if (code === 0x7d || code === 0x5d) {
      depth--;
      index++;
    } else {
      while (index < text.length && !',:]}'.includes(text.charAt(index))) index++;
    }
    if (depth === 0) return index;
    // Inside a container: step over a separator between its members or items.
    while (text.charAt(index) === ',' || text.charAt(index) === ':') index++;
  }
}

// The canonical text of the value at `at` (ending at `end`) without the members `node` names.
// It recurses only along the pointers, so its depth is bounded by MAX_POINTER_DEPTH.
function prune(text: string, at: number, end: number, node: PointerNode): string {
  const open = text.charCodeAt(at);
  if ((open !== 0x7b && open !== 0x5b) || end - at === 2) return text.slice(at, end);
  const kept: string[] = [];
  let index = at + 1;
  for (let item = 0; index < end - 1; item++) {
    let token: string;
    let head = '';
    if (open === 0x7b) {
      const nameEnd = valueEnd(text, index);
      head = text.slice(index, nameEnd + 1);
      token = JSON.parse(text.slice(index, nameEnd)) as string;
      index = nameEnd + 1;
    } else {
      token = String(item);
    }
    const valueAt = index;
    index = valueEnd(text, valueAt);
    const child = node.children.get(token);
    if (child === undefined) kept.push(head + text.slice(valueAt, index));
    else if (!child.leaf) kept.push(head + prune(text, valueAt, index, child));
    index++;
  }
  return open === 0x7b ? `{${kept.join(',')}}` : `[${kept.join(',')}]`;
}

/**
 * Canonical JSON text without the members the pointers name: an object member by its name, an
 * array item by its index (the items after it move up, as JSON Patch's `remove` does); a pointer
 * to nothing leaves the text as it is. Members are left out before any is compared, so a body that
 * differs only in them is the same request.
 *
 * @param canonical - canonical JSON text (`canonicalJson` or `canonicalJsonText` output)
 */
export function withoutIgnored(canonical: string, ignored: IgnoredMembers): string {
  if (ignored.root.children.size === 0) return canonical;
  return prune(canonical, 0, canonical.length, ignored.root);
}

/**
 * The top-level members of canonical JSON text, each name with the canonical text of its value
 * (the texts of a name sent more than once joined by `,`, in the order they came), or `undefined`
 * when the text is not an object.
 */
export function topLevelMembers(canonical: string): Map<string, string> | undefined {
  if (canonical.charCodeAt(0) !== 0x7b) return undefined;
  const members = new Map<string, string>();
  let index = 1;
  while (index < canonical.length - 1) {
    const nameEnd = valueEnd(canonical, index);
    const name = JSON.parse(canonical.slice(index, nameEnd)) as string;
    const valueAt = nameEnd + 1;
    index = valueEnd(canonical, valueAt);
    const value = canonical.slice(valueAt, index);
    const before = members.get(name);
    members.set(name, before === undefined ? value : `${before},${value}`);
    index++;
  }
  return members;
}
