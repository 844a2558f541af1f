import { describe, expect, it } from 'vitest';
import { maskSecrets } from '../../src/cli/location.js';
import { idem } from '../support/cli.js';

// mysql2 reads a URL when its pool is made, before it connects: each of these is refused without
// a server. Port 1 is never listened on, so nothing here reaches one either way.
const unusable: readonly [string, string][] = [
  [
    'mysql://root:pw%zz@127.0.0.1:1/test',
    'idem: cannot open MySQL at mysql://root:***@127.0.0.1:1/test: the password holds a malformed percent-escape',
  ],
  [
    'mysql://r%zz@127.0.0.1:1/test',
    'idem: cannot open MySQL at mysql://r%zz@127.0.0.1:1/test: the user name holds a malformed percent-escape',
  ],
  [
    'mysql://root@127.0.0.1:1/te%zzst',
    'idem: cannot open MySQL at mysql://root@127.0.0.1:1/te%zzst: the database name holds a malformed percent-escape',
  ],
  [
    'mysql://root@127.0.0.1:1/test?ssl=bogus',
    "idem: cannot open MySQL at mysql://root@127.0.0.1:1/test?ssl=bogus: Unknown SSL profile 'bogus'",
  ],
  [
    'mysql://root@127.0.0.1:1/test?ssl=1',
    "idem: cannot open MySQL at mysql://root@127.0.0.1:1/test?ssl=1: SSL profile must be an object, instead it's a number",
  ],
];

describe('a MySQL URL mysql2 cannot use', () => {
  it.each(unusable)('%s is refused in one line with exit 1', async (url, line) => {
    for (const args of [
      ['pending', '--url', url],
      ['doctor', '--url', url],
    ]) {
      const result = await idem(args);
      expect({ args, code: result.code }).toEqual({ args, code: 1 });
      expect(result.stderr.startsWith(line)).toBe(true);
      // One line: no stack, no file of the driver's.
      expect(result.stderr.trimEnd().split('\n')).toHaveLength(1);
      expect(result.stderr).not.toMatch(/URIError|TypeError|node_modules/);
      expect(result.stderr).not.toContain('pw%zz');
    }
  });
});

describe('passwords are hidden only where a URL holds them', () => {
  it('leaves the same text elsewhere in a message as it is', async () => {
    const [mysql, pg] = await Promise.all([
      idem(['pending', '--url', 'mysql://root:test@127.0.0.1:1/test']),
      idem(['pending', '--url', 'postgres://postgres:test@127.0.0.1:1/test']),
    ]);
    expect(mysql.stderr).toBe(
      'idem: cannot connect to MySQL at mysql://root:***@127.0.0.1:1/test: connect ECONNREFUSED 127.0.0.1:1\n',
    );
    expect(pg.stderr).toBe(
      'idem: cannot connect to PostgreSQL at postgres://postgres:***@127.0.0.1:1/test (schema "public"): connect ECONNREFUSED 127.0.0.1:1\n',
    );
  });

  it('maskSecrets hides a secret in a userinfo or a password parameter, nowhere else', () => {
    expect(maskSecrets('no table at mysql://root:test@db/test, user test', ['test', 'te'])).toBe(
      'no table at mysql://root:***@db/test, user test',
    );
    expect(
      maskSecrets("argument 'postgres://app:p@ss/w@db/x' for p@ss/w is invalid", ['p@ss/w']),
    ).toBe("argument 'postgres://app:***@db/x' for p@ss/w is invalid");
    expect(maskSecrets('a://u:s@h and b://v:s@h?password=s&x=s', ['s'])).toBe(
      'a://u:***@h and b://v:***@h?password=***&x=s',
    );
    // A URL whose password is not one of the secrets, or that has none, is left alone.
    expect(maskSecrets('mysql://root@db/s and mysql://u:other@db/s', ['s'])).toBe(
      'mysql://root@db/s and mysql://u:other@db/s',
    );
  });
});
