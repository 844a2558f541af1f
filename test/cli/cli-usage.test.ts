import { EventEmitter } from 'node:events';
import { existsSync } from 'node:fs';
import { PassThrough } from 'node:stream';
import { describe, expect, it } from 'vitest';
import type { CliIo } from '../../src/cli/io.js';
import { ExitCode, runCli } from '../../src/cli/run.js';
import { SWEEP_NOW, seedBacklog, tally } from '../support/backlog.js';
import { freshDbPath, tempDir } from '../support/temp.js';

const dir = tempDir('idem-usage-');

function collect(stream: PassThrough): () => string {
  let text = '';
  stream.on('data', (chunk: Buffer) => {
    text += chunk.toString();
  });
  return () => text;
}

async function run(argv: string[], env: CliIo['env'] = {}) {
  const stdout = new PassThrough();
  const stderr = new PassThrough();
  const out = collect(stdout);
  const err = collect(stderr);
  const io: CliIo = { stdout, stderr, env, signals: new EventEmitter() };
  const code = await runCli(argv, io);
  return { code, stdout: out(), stderr: err() };
}

describe('runCli, in-process', () => {
  it('refuses every malformed or out-of-range flag with exit 2 and the usage', async () => {
    const path = freshDbPath(dir);
    seedBacklog(path, { expired: 3, pending: 1 });
    const missing = freshDbPath(dir);
    const now = ['--now', String(SWEEP_NOW)];
    const cases: string[][] = [
      [],
      ['nonsense'],
      ['stats', '--db', path, '--verbose'],
      ['stats', '--db', path, 'extra'],
      ['stats', '--db', path, '--now', 'yesterday'],
      ['stats', '--db', path, '--now', ''],
      ['stats', '--db', path, '--now', '1e3'],
      ['expired', '--db', path, ...now, '--limit', '0'],
      ['expired', '--db', path, ...now, '--limit', '-3'],
      ['purge', '--db', path, ...now, '--limit', '101'],
      ['purge', '--db', path, ...now, '--limit', 'ten'],
      ['purge', '--db', missing, ...now, '--limit', '2.5'],
      ['purge', '--db', path, ...now, '--limit'],
      ['sweep', '--db', path, ...now, '--batch', '0'],
      ['sweep', '--db', path, ...now, '--batch', '10001'],
      ['sweep', '--db', path, ...now, '--batch', '0x10'],
      ['sweep', '--db', missing, ...now, '--max-batches', '0'],
      ['sweep', '--db', path, ...now, '--max-seconds', '0'],
      ['sweep', '--db', path, ...now, '--max-seconds', '-1'],
      ['sweep', '--db', path, ...now, '--max-seconds', 'soon'],
      ['sweep', '--db', path, ...now, '--batch-millis', '0'],
      ['sweep', '--db', path, ...now, '--batch-millis', '60001'],
      ['sweep', '--db', path, ...now, '--batch-millis', 'fast'],
      ['migrate', '--db', missing, '--now', '5'],
    ];
    for (const args of cases) {
      const result = await run(args);
      expect({ args, code: result.code }).toEqual({ args, code: ExitCode.usage });
      expect(result.stderr).toContain('Usage: idem');
      expect(result.stdout).toBe('');
    }
    expect(tally(path)).toEqual({ expired: 3, live: 0, pending: 1, stalePending: 0 });
    expect(existsSync(missing)).toBe(false);
  });

  it('refuses an ambiguous or malformed store location with exit 2, opening nothing', async () => {
    const path = freshDbPath(dir);
    seedBacklog(path, { expired: 3, pending: 1 });
    const missing = freshDbPath(dir);
    // Port 1 on the loopback: nothing listens there, so a connection attempt would fail with 1.
    const pgUrl = 'postgres://postgres@127.0.0.1:1/test';
    const cases: [string[], CliIo['env']][] = [
      [['purge', '--db', path, '--url', pgUrl], {}],
      [['purge', '--url', pgUrl, '--db', path], {}],
      [['stats', '--url', 'redis://127.0.0.1/0'], {}],
      [['stats', '--url', 'mysql://root@127.0.0.1:1/test', '--schema', 'billing'], {}],
      [['stats', '--url', missing], {}],
      [['stats', '--url', ''], {}],
      [['stats', '--db', path, '--schema', 'billing'], {}],
      [['migrate', '--schema', 'billing'], { IDEM_DB: missing }],
      [['stats', '--url', pgUrl, '--schema', ''], {}],
      [['stats', '--url', pgUrl, '--schema', 'x'.repeat(64)], {}],
      [['migrate'], { DATABASE_URL: 'file:./idempotency.db' }],
      [['sweep', '--schema', 'billing', '--db', missing], { DATABASE_URL: pgUrl }],
    ];
    for (const [args, env] of cases) {
      const result = await run(args, env);
      expect({ args, env, code: result.code }).toEqual({ args, env, code: ExitCode.usage });
      expect(result.stderr).toContain('Usage: idem');
      expect(result.stderr).not.toContain('ECONNREFUSED');
      expect(result.stdout).toBe('');
    }
    expect(tally(path)).toEqual({ expired: 3, live: 0, pending: 1, stalePending: 0 });
    expect(existsSync(missing)).toBe(false);
  });

  it('takes IDEM_DB over DATABASE_URL', async () => {
    const path = freshDbPath(dir);
    seedBacklog(path, { expired: 2, pending: 1 });
    const env = { DATABASE_URL: 'postgres://postgres@127.0.0.1:1/test', IDEM_DB: path };
    const result = await run(['stats', '--now', String(SWEEP_NOW), '--json'], env);
    expect(result.code).toBe(ExitCode.ok);
    expect(JSON.parse(result.stdout)).toMatchObject({ expired: 2, pending: 1 });
  });

  it('takes --db over DATABASE_URL, and DATABASE_URL over the default file', async () => {
    const path = freshDbPath(dir);
    seedBacklog(path, { expired: 2 });
    const env = { DATABASE_URL: 'postgres://postgres:sekret@127.0.0.1:1/test' };
    const onFile = await run(['stats', '--db', path, '--now', String(SWEEP_NOW), '--json'], env);
    expect(JSON.parse(onFile.stdout)).toMatchObject({ expired: 2 });
    const onServer = await run(['stats'], env);
    expect(onServer.code).toBe(ExitCode.runtime);
    expect(onServer.stderr).toBe(
      'idem: cannot connect to PostgreSQL at postgres://postgres:***@127.0.0.1:1/test (schema "public"): connect ECONNREFUSED 127.0.0.1:1\n',
    );
  });

  it('runs a command to completion and resolves with its exit code', async () => {
    const path = freshDbPath(dir);
    seedBacklog(path, { expired: 12, stalePending: 2 });
    const result = await run(['sweep', '--db', path, '--now', String(SWEEP_NOW), '--batch', '5']);
    expect(result.code).toBe(ExitCode.ok);
    expect(JSON.parse(result.stdout)).toMatchObject({ deleted: 12, batches: 3, remaining: 0 });
    expect(tally(path)).toEqual({ expired: 0, live: 0, pending: 0, stalePending: 2 });
  });

  it('sweeps by a time budget without --batch, and with --batch-millis under a --batch cap', async () => {
    const path = freshDbPath(dir);
    seedBacklog(path, { expired: 250, stalePending: 2 });
    const byTime = await run([
      'sweep',
      '--db',
      path,
      '--now',
      String(SWEEP_NOW),
      '--max-batches',
      '1',
    ]);
    expect(byTime.code).toBe(ExitCode.ok);
    // The first batch of a timed sweep has 100 rows.
    expect(JSON.parse(byTime.stdout)).toMatchObject({ deleted: 100, batches: 1, remaining: 150 });
    const capped = await run([
      'sweep',
      '--db',
      path,
      '--now',
      String(SWEEP_NOW),
      '--batch',
      '40',
      '--batch-millis',
      '2.5',
    ]);
    expect(capped.code).toBe(ExitCode.ok);
    expect(JSON.parse(capped.stdout)).toMatchObject({ deleted: 150, remaining: 0 });
    // No batch went above 40 rows: at least four batches for 150 rows.
    expect(JSON.parse(capped.stdout).batches).toBeGreaterThanOrEqual(4);
    expect(tally(path)).toEqual({ expired: 0, live: 0, pending: 0, stalePending: 2 });
  });

  it('stops a sweep on SIGINT from its signal source and returns 130', async () => {
    const path = freshDbPath(dir);
    seedBacklog(path, { expired: 50 });
    const stdout = new PassThrough();
    const stderr = new PassThrough();
    const out = collect(stdout);
    const signals = new EventEmitter();
    const running = runCli(['sweep', '--db', path, '--now', String(SWEEP_NOW), '--batch', '10'], {
      stdout,
      stderr,
      env: {},
      signals,
    });
    // The CLI has subscribed synchronously up to its first await; the signal lands before any
    // batch after the first can start.
    await new Promise((resolve) => setImmediate(resolve));
    signals.emit('SIGINT');
    expect(await running).toBe(130);
    const summary = JSON.parse(out()) as { deleted: number; remaining: number };
    expect(summary.deleted + summary.remaining).toBe(50);
    expect(tally(path).expired).toBe(summary.remaining);
    expect(signals.listenerCount('SIGINT')).toBe(0);
  });
});
