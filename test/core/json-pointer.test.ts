import { describe, expect, it } from 'vitest';
import { canonicalJsonText } from '../../src/core/canonical-json.js';
import {
  MAX_IGNORED_POINTERS,
  MAX_POINTER_DEPTH,
  readIgnoredMembers,
  topLevelMembers,
  withoutIgnored,
} from '../../src/core/json-pointer.js';
import { InvalidOptionError } from '../../src/index.js';

const canonical = (text: string) => canonicalJsonText(text) as string;
const without = (text: string, ignore: string[]) =>
  withoutIgnored(canonical(text), readIgnoredMembers(ignore, 'ignore'));

describe('JSON pointers left out of a canonical body', () => {
  it('leaves out nested members, array items and names with "/" or "~"', () => {
    const body =
      '{"a":1,"meta":{"traceId":"t","keep":[1,{"x":"}\\"{"}]},"items":[{"at":1,"v":2},{"at":3}],"a/b":5,"m~n":6}';
    expect(without(body, ['/meta/traceId'])).toBe(
      canonical(
        '{"a":1,"meta":{"keep":[1,{"x":"}\\"{"}]},"items":[{"at":1,"v":2},{"at":3}],"a/b":5,"m~n":6}',
      ),
    );
    expect(without(body, ['/items/0/at', '/items/1'])).toBe(
      canonical(
        '{"a":1,"meta":{"traceId":"t","keep":[1,{"x":"}\\"{"}]},"items":[{"v":2}],"a/b":5,"m~n":6}',
      ),
    );
    expect(without(body, ['/a~1b', '/m~0n', '/meta/keep/1/x'])).toBe(
      canonical('{"a":1,"meta":{"traceId":"t","keep":[1,{}]},"items":[{"at":1,"v":2},{"at":3}]}'),
    );
  });

  it('changes nothing for a pointer to a member the body lacks, or into a scalar', () => {
    const body = '{"a":[1,2],"b":"x"}';
    for (const pointer of ['/c', '/a/2', '/a/01', '/a/-', '/b/0', '/b/x/y']) {
      expect(without(body, [pointer])).toBe(canonical(body));
    }
    expect(without('[1,2,3]', ['/1'])).toBe('[1,3]');
    expect(without('"text"', ['/a'])).toBe('"text"');
  });

  it('leaves out every member of a name sent twice', () => {
    expect(without('{"a":1,"t":1,"t":2}', ['/t'])).toBe('{"a":1}');
  });

  it('splits the top-level members, joining a name sent twice', () => {
    expect(topLevelMembers(canonical('{"b":{"c":[1,"]"]},"a":"x","b":2}'))).toEqual(
      new Map([
        ['a', '"x"'],
        ['b', '{"c":[1,"]"]},2'],
      ]),
    );
    expect(topLevelMembers('{}')).toEqual(new Map());
    expect(topLevelMembers('[1]')).toBeUndefined();
    expect(topLevelMembers('"s"')).toBeUndefined();
  });

  it('refuses what is not a list of JSON pointers, naming the pointer', () => {
    const refused: [unknown, string][] = [
      ['/a', 'must be an array'],
      [['a'], '"a", which is not a JSON pointer'],
      [[''], 'the whole body'],
      [['/a~'], '"/a~"'],
      [['/a~2'], '"/a~2"'],
      [['/\ud800'], 'lone UTF-16 surrogate'],
      [[7], 'must hold strings'],
      [['/a'.repeat(MAX_POINTER_DEPTH + 1)], `at most ${MAX_POINTER_DEPTH}`],
      [Array.from({ length: MAX_IGNORED_POINTERS + 1 }, (_, i) => `/${i}`), 'at most 64'],
    ];
    for (const [list, message] of refused) {
      expect(() => readIgnoredMembers(list, 'fingerprint.ignore')).toThrow(InvalidOptionError);
      expect(() => readIgnoredMembers(list, 'fingerprint.ignore')).toThrow(message);
    }
    expect(() => readIgnoredMembers(['/a/~0~1', '/'], 'ignore')).not.toThrow();
  });
});
