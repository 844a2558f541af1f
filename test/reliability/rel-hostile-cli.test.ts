import { EventEmitter } from 'node:events';
import { copyFileSync, mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { PassThrough } from 'node:stream';
import Database from 'better-sqlite3';
import { describe, expect, it } from 'vitest';
import { ExitCode, runCli } from '../../src/cli/run.js';
import { openSqliteStore } from '../../src/sqlite/index.js';
import { snapshotDir } from '../support/rel-files.js';
import { tempDir } from '../support/temp.js';

const dir = tempDir();
const files = join(dir, 'files');
mkdirSync(files);
const store = join(files, 'store.db');
{
  const seeded = openSqliteStore(store);
  seeded.reserve('pending', 'd', 1);
  seeded.reserve('done', 'd', 1);
  seeded.finish('done', 'd', { receipt: 1 });
  seeded.close();
}
const text = join(files, 'notes.txt');
writeFileSync(text, 'not a database\n'.repeat(300));
const foreign = join(files, 'foreign.db');
{
  const client = new Database(foreign);
  client.exec(
    "CREATE TABLE keys (id TEXT PRIMARY KEY, value TEXT); INSERT INTO keys VALUES ('a', 'b')",
  );
  client.close();
}
const folder = join(files, 'a-folder');
mkdirSync(folder);
const copy = join(files, 'copy.db');
copyFileSync(store, copy);

async function run(argv: string[], env: Record<string, string> = {}) {
  const stdout = new PassThrough();
  const stderr = new PassThrough();
  let out = '';
  let err = '';
  stdout.on('data', (chunk: Buffer) => {
    out += chunk.toString();
  });
  stderr.on('data', (chunk: Buffer) => {
    err += chunk.toString();
  });
  const code = await runCli(argv, { stdout, stderr, env, signals: new EventEmitter() });
  return { code, stdout: out, stderr: err };
}

const db = ['--db', store];
// Hostile flags and files for the `idem` CLI: usage errors exit 2 before anything is opened;
// files that cannot be used exit 1 with one line on stderr. Nothing may change either way.
const CASES: [string, string[], number, Record<string, string>?][] = [
  [
    'a limit of 100,000 digits',
    ['purge', ...db, '--now', '10', '--limit', '9'.repeat(100_000)],
    ExitCode.usage,
  ],
  [
    'a limit with a control character',
    ['purge', ...db, '--now', '10', '--limit', '5\u0007'],
    ExitCode.usage,
  ],
  ['a limit with an escape sequence', ['expired', ...db, '--limit', '\u001b[31m5'], ExitCode.usage],
  ['now with a newline', ['purge', ...db, '--now', '10\n', '--limit', '5'], ExitCode.usage],
  ['now Infinity', ['purge', ...db, '--now', 'Infinity'], ExitCode.usage],
  ['now NaN', ['sweep', ...db, '--now', 'NaN'], ExitCode.usage],
  [
    'now of 400 digits (not finite as a double)',
    ['sweep', ...db, '--now', '9'.repeat(400)],
    ExitCode.usage,
  ],
  ['a batch with a unit', ['sweep', ...db, '--now', '10', '--batch', '100rows'], ExitCode.usage],
  ['a flag given as --db=', ['purge', '--db=', '--now', '10'], ExitCode.usage],
  [
    'an unknown flag after a valid purge',
    ['purge', ...db, '--now', '10', '--bogus'],
    ExitCode.usage,
  ],
  ['an unknown command with a huge name', ['x'.repeat(50_000)], ExitCode.usage],
  ['--url that is not a URL', ['stats', '--url', 'not a url'], ExitCode.usage],
  ['--url of another scheme', ['stats', '--url', 'redis://127.0.0.1/0'], ExitCode.usage],
  [
    '--url and --db together',
    ['purge', ...db, '--url', 'postgres://127.0.0.1:1/test'],
    ExitCode.usage,
  ],
  [
    '--schema empty',
    ['stats', '--url', 'postgres://127.0.0.1:1/test', '--schema', ''],
    ExitCode.usage,
  ],
  [
    '--schema of 64 bytes',
    ['stats', '--url', 'postgres://127.0.0.1:1/test', '--schema', 's'.repeat(64)],
    ExitCode.usage,
  ],
  [
    '--url of a server that is not there',
    ['sweep', '--url', 'postgres://postgres@127.0.0.1:1/test', '--now', '10'],
    ExitCode.runtime,
  ],
  ['--db a directory', ['purge', '--db', folder, '--now', '10'], ExitCode.runtime],
  ['--db a text file', ['sweep', '--db', text, '--now', '10'], ExitCode.runtime],
  ['--db a foreign keys table', ['purge', '--db', foreign, '--now', '10'], ExitCode.runtime],
  [
    '--db a missing file with control characters',
    ['stats', '--db', join(files, 'x\u001b[2J\u0007.db')],
    ExitCode.runtime,
  ],
  ['IDEM_DB a directory', ['sweep', '--now', '10'], ExitCode.runtime, { IDEM_DB: folder }],
  ['migrate over a text file', ['migrate', '--db', text], ExitCode.runtime],
];

describe('hostile input to the idem CLI: exit 2 or 1, one clear message, nothing changed', () => {
  it.each(CASES)('%s', async (_, argv, expected, env = {}) => {
    const before = snapshotDir(files);
    const result = await run(argv, env);
    expect(result.code).toBe(expected);
    expect(result.stdout).toBe('');
    // A message for a human, never a stack trace.
    expect(result.stderr).not.toBe('');
    expect(result.stderr).not.toMatch(/\n\s+at /);
    expect(snapshotDir(files)).toEqual(before);
  });

  it('left the store usable', async () => {
    const result = await run(['stats', '--db', copy, '--now', '10', '--json']);
    expect(result.code).toBe(ExitCode.ok);
    expect(JSON.parse(result.stdout)).toMatchObject({ pending: 1, done: 1 });
  });
});
