import { execFile } from 'node:child_process';
import { EventEmitter } from 'node:events';
import { mkdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { PassThrough } from 'node:stream';
import { promisify } from 'node:util';
import Database from 'better-sqlite3';
import { describe, expect, it } from 'vitest';
import { maskUrl, urlSecrets } from '../../src/cli/location.js';
import { runCli } from '../../src/cli/run.js';
import { storedId } from '../../src/http/scope.js';
import { openSqliteStore } from '../../src/sqlite/index.js';
import { idem, idemInShell, jsonLine } from '../support/cli.js';
import { snapshotDir } from '../support/rel-files.js';
import { readRows } from '../support/sqlite-harness.js';
import { freshDbPath, tempDir } from '../support/temp.js';

const dir = tempDir('idem-cli-keys-');

// Keys a hostile client can send through makeIdempotent or a lax proxy: a terminal escape, a
// newline forging a row, an option-looking dash, quotes, NFC against NFD, a right-to-left
// override, spaces; and scoped ids, one with a hostile scope.
const KEYS = [
  'plain-1',
  'esc\u001b[2J',
  'line\nforged  live  token 1  lease ends in 9s',
  '-dash',
  "it's",
  'caf\u00e9',
  'cafe\u0301',
  '"quoted"',
  'rtl\u202eevil',
  'tab\there',
  'bell\u0007\u009b31m',
  'sp ace',
  storedId('client-7', 'order-42'),
  storedId('client-7', 'order 43\u001b[0m'),
  storedId('tenant "x"\n', 'k\u001b'),
  storedId('client-8', 'order-42'),
];

function seededWithKeys(): string {
  const path = freshDbPath(dir);
  const store = openSqliteStore(path);
  for (const key of KEYS) store.acquire(key, 'fp', { expires: 1000, now: 100, leaseSeconds: 30 });
  store.close();
  return path;
}

function shellQuote(text: string): string {
  return `'${text.replaceAll("'", "'\\''")}'`;
}

// The key words of a `pending` line: everything before its state.
function keyWords(line: string): string {
  const match = /^(.*) {2}(?:live|lapsed|unrecorded|unleased) {2}token /.exec(line);
  if (match?.[1] === undefined) throw new Error(`not a pending line: ${line}`);
  return match[1];
}

const PRINTABLE_LINES = /^[\x20-\x7e\n]*$/;

// The arguments a real shell makes of pasted words.
async function shellWords(words: string): Promise<string[]> {
  const { stdout } = await promisify(execFile)('/bin/sh', ['-c', `printf '%s\\0' ${words}`]);
  return stdout.split('\0').slice(0, -1);
}

// `idem` in this process, for the many commands a test runs on arguments a shell made.
async function runIdem(argv: string[]): Promise<{ code: number; stdout: string }> {
  const stdout = new PassThrough();
  let out = '';
  stdout.on('data', (chunk: Buffer) => {
    out += chunk.toString();
  });
  const io = { stdout, stderr: new PassThrough(), env: {}, signals: new EventEmitter() };
  const code = await runCli(argv, io);
  return { code, stdout: out };
}

describe('keys in the output of idem', () => {
  it('pending prints each key as printable ASCII on its own line, and each pasted back names its row', async () => {
    const path = seededWithKeys();
    const human = await idem(['pending', '--db', path, '--now', '110']);
    expect(human.code).toBe(0);
    expect(human.stdout).toMatch(PRINTABLE_LINES);
    const lines = human.stdout.trimEnd().split('\n');
    expect(lines).toHaveLength(KEYS.length);
    const token = lines
      .find((line) => line.startsWith('--scope client-7 order-42  '))
      ?.match(/ token (\d+) /)?.[1];
    expect(token).toMatch(/^\d+$/);
    expect(lines).toContain(
      `--scope client-7 order-42  live  token ${token}  lease ends in 20s  expires in 14m 50s`,
    );
    expect(lines.map(keyWords)).toContain('plain-1');
    // Pasted after `idem show`, each names the same row: the shell unquotes, idem decodes.
    const shown: string[] = [];
    for (const line of lines) {
      const argv = await shellWords(`show ${keyWords(line)} --db ${shellQuote(path)} --json`);
      const result = await runIdem(argv);
      expect(result.code).toBe(0);
      shown.push(JSON.parse(result.stdout).key);
    }
    expect(shown.sort()).toEqual([...KEYS].sort());
    // And after `idem release`, in a real shell and a real process: the scoped key and a hostile
    // one are released, nothing else.
    const scoped = lines.find((line) => line.startsWith('--scope client-7 order-42'));
    const hostile = lines.find((line) => line.includes('esc\\u001b'));
    for (const line of [scoped, hostile]) {
      expect(line).toBeDefined();
      const released = await idemInShell(
        `release ${keyWords(line ?? '')} --yes --json --db ${shellQuote(path)}`,
      );
      expect(released.code).toBe(0);
      expect(jsonLine(released).result).toBe('released');
    }
    const left = readRows(path).map((row) => row.id);
    expect(left).not.toContain(storedId('client-7', 'order-42'));
    expect(left).not.toContain('esc\u001b[2J');
    expect(left).toHaveLength(KEYS.length - 2);
  });

  it('--scope on pending, show and release names one scope exactly', async () => {
    const path = seededWithKeys();
    const pending = await idem(['pending', '--db', path, '--now', '110', '--scope', 'client-7']);
    expect(pending.code).toBe(0);
    expect(pending.stdout.trimEnd().split('\n').map(keyWords)).toEqual([
      `--scope client-7 '"order 43\\u001b[0m"'`,
      '--scope client-7 order-42',
    ]);
    const json = await idem([
      'pending',
      '--db',
      path,
      '--now',
      '110',
      '--scope',
      'client-8',
      '--json',
    ]);
    expect(JSON.parse(json.stdout).map((row: { key: string }) => row.key)).toEqual([
      storedId('client-8', 'order-42'),
    ]);
    const show = await idem(['show', 'order-42', '--scope', 'client-8', '--db', path, '--json']);
    expect(jsonLine(show).key).toBe(storedId('client-8', 'order-42'));
    // Unscoped, the same key is another row: there is none.
    const unscoped = await idem(['show', 'order-42', '--db', path]);
    expect(unscoped.code).toBe(1);
    expect(unscoped.stderr).toContain('no row with the key order-42 outside a scope');
    expect(unscoped.stderr).toMatch(
      /stored under the scope\(s\) client-\d, client-\d: type "idem show --scope client-\d order-42"/,
    );
    const release = await idem([
      'release',
      'order-42',
      '--scope',
      'client-8',
      '--yes',
      '--db',
      path,
    ]);
    expect(release.code).toBe(0);
    expect(release.stdout).toBe('released --scope client-8 order-42\n');
    expect(readRows(path).map((row) => row.id)).toContain(storedId('client-7', 'order-42'));
  });

  it('expired and purge print ids escaped; --json keeps them exact in printable ASCII', async () => {
    const path = freshDbPath(dir);
    const store = openSqliteStore(path);
    for (const key of ['a\u001b[2J', 'b\nc', storedId('s', 'k'), 'rtl\u202e\u009b']) {
      store.reserve(key, 'fp', 10);
      store.finish(key, 'fp', { ok: true });
    }
    store.close();
    const expired = await idem(['expired', '--db', path, '--now', '20']);
    expect(expired.stdout).toBe(
      `--scope s k\n'"a\\u001b[2J"'\n'"b\\u000ac"'\n'"rtl\\u202e\\u009b"'\n`,
    );
    const json = await idem(['purge', '--db', path, '--now', '20', '--json']);
    expect(json.stdout).toMatch(PRINTABLE_LINES);
    expect(jsonLine(json).ids).toEqual([
      storedId('s', 'k'),
      'a\u001b[2J',
      'b\nc',
      'rtl\u202e\u009b',
    ]);
  });
});

describe('idem show', () => {
  // The token each key was claimed (or last taken over) with, for the assertions below.
  const tokens = new Map<string, number>();
  function seededRecords(): string {
    const path = freshDbPath(dir);
    const store = openSqliteStore(path);
    const lease = { expires: 1000, now: 100, leaseSeconds: 30 };
    const claim = (key: string, fingerprint: string, options = lease) => {
      const got = store.acquire(key, fingerprint, options);
      if (got.status !== 'acquired') throw new Error(`${key} not acquired: ${got.status}`);
      tokens.set(key, got.fencingToken);
      return got.fencingToken;
    };
    store.finish(
      'http',
      'fp-http',
      {
        wire: 1,
        status: 201,
        headers: { 'content-type': 'application/json' },
        body: '{"id":"p_1","note":"\u001b[2J"}',
      },
      claim('http', 'fp-http'),
    );
    store.finish(
      'binary',
      'fp',
      { wire: 1, status: 200, headers: {}, body: '/wD+', encoding: 'base64' },
      claim('binary', 'fp'),
    );
    store.finish(
      'huge',
      'fp',
      { wire: 1, status: 200, headers: {}, omittedBytes: 5_000_000 },
      claim('huge', 'fp'),
    );
    store.finish(
      'open-stream',
      'fp',
      { wire: 1, status: 200, headers: {}, omittedBytes: 70, omittedBecause: 'still-open' },
      claim('open-stream', 'fp'),
    );
    store.finish('value', 'fp', { receipt: 7 }, claim('value', 'fp'));
    claim('lapsed', 'fp-l', { ...lease, leaseSeconds: 1 });
    claim('lapsed', 'fp-l', { ...lease, now: 102 });
    store.markUnrecorded('unrecorded', 'fp', claim('unrecorded', 'fp'));
    store.close();
    return path;
  }

  it('prints the whole record: status, lease, fencing token, fingerprint, retention and the answer', async () => {
    const path = seededRecords();
    const [http, lapsed, value, huge, binary, unrecorded, openStream] = await Promise.all(
      ['http', 'lapsed', 'value', 'huge', 'binary', 'unrecorded', 'open-stream'].map((key) =>
        idem(['show', key, '--db', path, '--now', '1013.5']),
      ),
    );
    expect(http?.stdout).toBe(
      [
        'key          http',
        'status       done',
        'lease        none',
        `token        ${tokens.get('http')}`,
        'fingerprint  fp-http',
        'retention    expired 13.5s ago (no longer replayed; a sweep deletes it)',
        'answer       HTTP 201, 26 bytes, application/json',
        '',
      ].join('\n'),
    );
    expect(lapsed?.stdout).toContain('status       pending (lapsed)\n');
    expect(lapsed?.stdout).toContain('lease        ended 14m 41s ago\n');
    expect(lapsed?.stdout).toContain(`token        ${tokens.get('lapsed')}\n`);
    expect(lapsed?.stdout).toContain('answer       none yet (pending)\n');
    expect(lapsed?.stdout).not.toMatch(/-\d/);
    expect(value?.stdout).toContain(
      'answer       a stored value (not an HTTP answer), 13 bytes of JSON',
    );
    expect(huge?.stdout).toContain(
      'answer       HTTP 200, 5000000 bytes, body not kept (over maxStoredBytes)\n',
    );
    expect(openStream?.stdout).toContain(
      'answer       HTTP 200, 70 bytes, body not kept (its stream was still open after streamRecordAfterSeconds)\n',
    );
    expect(binary?.stdout).toContain('answer       HTTP 200, 3 bytes');
    expect(unrecorded?.stdout).toContain('status       pending (unrecorded');
  });

  it('--body prints the body with nothing that acts on the terminal; --json prints it exactly', async () => {
    const path = seededRecords();
    const [human, binary, value, json] = await Promise.all([
      idem(['show', 'http', '--db', path, '--body']),
      idem(['show', 'binary', '--db', path, '--body']),
      idem(['show', 'value', '--db', path, '--body']),
      idem(['show', 'http', '--db', path, '--body', '--json', '--now', '500']),
    ]);
    expect(human.stdout).toMatch(PRINTABLE_LINES);
    expect(human.stdout.endsWith('\n\n{"id":"p_1","note":"\\u001b[2J"}\n')).toBe(true);
    expect(binary.stdout.endsWith('\n\n(binary, base64)\n/wD+\n')).toBe(true);
    expect(value.stdout.endsWith('\n\n{"receipt":7}\n')).toBe(true);
    expect(json.stdout).toMatch(PRINTABLE_LINES);
    expect(jsonLine(json)).toEqual({
      key: 'http',
      status: 'done',
      fingerprint: 'fp-http',
      expires: 1000,
      leaseUntil: 130,
      fencingToken: tokens.get('http'),
      unrecorded: false,
      answer: {
        kind: 'http',
        status: 201,
        bytes: 26,
        kept: true,
        headers: { 'content-type': 'application/json' },
        body: '{"id":"p_1","note":"\u001b[2J"}',
      },
      now: 500,
    });
  });

  it('exits 1 for a missing key, and 2 without a key, with its own usage', async () => {
    const path = seededRecords();
    const [missing, none] = await Promise.all([
      idem(['show', 'nope', '--db', path, '--json']),
      idem(['show', '--db', path]),
    ]);
    expect(missing.code).toBe(1);
    expect(missing.stdout).toBe('');
    expect(missing.stderr).toBe(
      'idem: no row with the key nope; list the keys in flight with "idem pending", or give the scope the key was stored under with --scope SCOPE\n',
    );
    expect(none.code).toBe(2);
    expect(none.stderr).toContain('Usage: idem show');
  });
});

describe('idem release --json and deadlines', () => {
  it('release --json prints one line for every outcome, with the exit codes of the human form', async () => {
    const path = freshDbPath(dir);
    const store = openSqliteStore(path);
    store.reserve('p', 'fp', 1000);
    store.reserve('d', 'fp', 1000);
    store.finish('d', 'fp', { ok: 1 });
    store.close();
    const run = (key: string, ...flags: string[]) =>
      idem(['release', key, '--db', path, '--json', ...flags]);
    const unconfirmed = await run('p');
    expect([unconfirmed.code, jsonLine(unconfirmed)]).toEqual([
      2,
      { key: 'p', result: 'unconfirmed' },
    ]);
    const done = await run('d', '--yes');
    expect([done.code, jsonLine(done)]).toEqual([1, { key: 'd', result: 'done' }]);
    const mismatch = await run('p', '--yes', '--fingerprint', 'other');
    expect([mismatch.code, jsonLine(mismatch)]).toEqual([1, { key: 'p', result: 'mismatch' }]);
    const released = await run('p', '--yes');
    expect([released.code, jsonLine(released)]).toEqual([0, { key: 'p', result: 'released' }]);
    const missing = await run('p', '--yes');
    expect([missing.code, jsonLine(missing)]).toEqual([1, { key: 'p', result: 'missing' }]);
  });

  it('pending prints a past deadline as past, never as a negative duration', async () => {
    const path = freshDbPath(dir);
    const store = openSqliteStore(path);
    const claim = store.acquire('k', 'fp', { expires: 1000, now: 100, leaseSeconds: 30 });
    store.close();
    const token = claim.status === 'acquired' ? claim.fencingToken : undefined;
    const result = await idem(['pending', '--db', path, '--now', '1013.5']);
    expect(result.stdout).toBe(
      `k  lapsed  token ${token}  lease ended 14m 43s ago  expired 13.5s ago\n`,
    );
    const migrate = await idem(['migrate', '--db', path, '--json']);
    expect(jsonLine(migrate)).toEqual({ store: path, upToDate: true });
  });
});

describe('a subcommand error shows that subcommand’s usage', () => {
  it('for errors found by commander, by the action and by the clock check', async () => {
    const path = seededWithKeys();
    const cases: [string[], string][] = [
      [['stats', '--db', path, '--schema', 'billing'], 'Usage: idem stats'],
      [['release', 'k', '--url', 'not a url'], 'Usage: idem release'],
      [['purge', '--db', path, '--now', '200000000000000'], 'Usage: idem purge'],
      [['show', 'k', '--db', path, '--scope', ''], 'Usage: idem show'],
      [['pending', '--db', path, '--limit', '0'], 'Usage: idem pending'],
    ];
    const results = await Promise.all(cases.map(([args]) => idem(args)));
    results.forEach((result, index) => {
      const [args, usage] = cases[index] ?? [[], ''];
      expect({ args, code: result.code }).toEqual({ args, code: 2 });
      expect(result.stderr).toContain(usage);
      expect(result.stderr).not.toContain('Usage: idem [options] [command]');
    });
  });
});

describe('passwords are never printed', () => {
  it('not for an unparseable --url or DATABASE_URL, nor a server that cannot be reached', async () => {
    const cases: [string[], Record<string, string>, number][] = [
      [['stats', '--url', 'postgres://app:s3cret@db:99999/x'], {}, 2],
      [['stats', '--url=postgres://app:s3cret@db:99999/x'], {}, 2],
      [['stats', '--url', 'postgres://app:p%40s3cret@db:99999/x'], {}, 2],
      [['stats'], { DATABASE_URL: 'postgres://app:s3cret@db:99999/x' }, 2],
      [['stats', 'postgres://app:s3cret@db/x'], {}, 2],
      [['stats', '--url', 'mysql://root:s3cret@127.0.0.1:1/x'], {}, 1],
      [['pending', '--url', 'postgres://app:s3cret@127.0.0.1:1/x?password=s3cret2'], {}, 1],
      [['migrate', '--json'], { DATABASE_URL: 'postgres://app:s3cret@127.0.0.1:1/x' }, 1],
      // Commander quotes the value it refuses: stderr hides the password anyway.
      [['purge', '--db', 'x.db', '--limit', 'postgres://app:s3cret@db/x'], {}, 2],
    ];
    const results = await Promise.all(cases.map(([args, env]) => idem(args, env)));
    results.forEach((result, index) => {
      const [args, , code] = cases[index] ?? [[], {}, 0];
      expect({ args, code: result.code }).toEqual({ args, code });
      expect(result.stderr).not.toBe('');
      expect(`${result.stdout}${result.stderr}`).not.toMatch(/s3cret/);
    });
    expect(results[5]?.stderr).toContain('mysql://root:***@127.0.0.1:1/x');
    expect(results[6]?.stderr).toContain('postgres://app:***@127.0.0.1:1/x?password=***');
    expect(results[8]?.stderr).toContain("argument 'postgres://app:***@db/x' is invalid");
  });

  it('maskUrl hides the password of any connection string, parseable or not', () => {
    expect(
      [
        'postgres://app:s3cret@db:5432/x',
        'postgres://app:s3cret@db:99999/x',
        'postgres://app:p@ss/w@db:99999/x',
        'mysql://root@127.0.0.1/x?password=abc&ssl=1',
        'postgres://app@db:99999/x',
        'postgres://:pw@h/x',
      ].map(maskUrl),
    ).toEqual([
      'postgres://app:***@db:5432/x',
      'postgres://app:***@db:99999/x',
      'postgres://app:***@db:99999/x',
      'mysql://root@127.0.0.1/x?password=***&ssl=1',
      'postgres://app@db:99999/x',
      'postgres://:***@h/x',
    ]);
    expect(urlSecrets('postgres://app:p%40ss@db/x')).toEqual(['p%40ss', 'p@ss']);
  });
});

describe('read commands create and change nothing', () => {
  const reads = (path: string, table?: string): string[][] => {
    const flags = ['--db', path, ...(table ? ['--table', table] : [])];
    return [
      ['stats', ...flags],
      ['expired', ...flags],
      ['pending', ...flags],
      ['show', 'k', ...flags],
      ['sweep', '--dry-run', ...flags],
    ];
  };

  it('a missing table exits 1 with the idem migrate hint, leaving the file byte for byte', async () => {
    const files = join(dir, `missing-table-${Date.now()}`);
    mkdirSync(files);
    const path = join(files, 'ops.db');
    expect((await idem(['migrate', '--db', path])).code).toBe(0);
    const before = snapshotDir(files);
    const writes = [
      ['purge', '--db', path, '--table', 'nope'],
      ['sweep', '--db', path, '--table', 'nope'],
      ['release', 'k', '--yes', '--db', path, '--table', 'nope'],
    ];
    const results = await Promise.all(
      [...reads(path, 'nope'), ...writes].map((args) => idem(args)),
    );
    for (const result of results) {
      expect(result.code).toBe(1);
      expect(result.stderr).toContain(`idem migrate --db ${path} --table nope`);
    }
    expect(snapshotDir(files)).toEqual(before);
  });

  it('a missing file is not created, and a store of an older version is not upgraded', async () => {
    const files = join(dir, `older-${Date.now()}`);
    mkdirSync(files);
    const missing = join(files, 'missing.db');
    // The keys table as 0.1.0 made it, without the library's journal: `migrate` would adopt it.
    const old = join(files, 'old.db');
    const client = new Database(old);
    client.exec(
      "CREATE TABLE keys (id TEXT PRIMARY KEY, fingerprint TEXT NOT NULL, status TEXT NOT NULL, response TEXT, expires REAL NOT NULL); INSERT INTO keys VALUES ('k', 'fp', 'pending', NULL, 5)",
    );
    client.close();
    const before = snapshotDir(files);
    const results = await Promise.all([...reads(missing), ...reads(old)].map((args) => idem(args)));
    for (const result of results) {
      expect(result.code).toBe(1);
      expect(result.stderr).toMatch(/idem migrate --db \S+(missing|old)\.db"/);
    }
    expect(results[5]?.stderr).toContain('lacks');
    expect(snapshotDir(files)).toEqual(before);
    expect((await idem(['migrate', '--db', old])).code).toBe(0);
    const stats = await idem(['stats', '--db', old, '--now', '10', '--json']);
    expect(jsonLine(stats)).toMatchObject({ pending: 1, stalePending: 1 });
  });

  it('reading an up-to-date store leaves its directory as it was', async () => {
    const files = join(dir, `up-to-date-${Date.now()}`);
    mkdirSync(files);
    const path = join(files, 'ops.db');
    const store = openSqliteStore(path);
    store.reserve('k', 'fp', 5);
    store.close();
    const before = snapshotDir(files);
    const results = await Promise.all(reads(path).map((args) => idem([...args, '--now', '10'])));
    expect(results.map((result) => result.code)).toEqual([0, 0, 0, 0, 0]);
    expect(snapshotDir(files)).toEqual(before);
    expect(readFileSync(path).equals(before.get('ops.db') ?? Buffer.alloc(0))).toBe(true);
  });
});
