import { EventEmitter } from 'node:events';
import { existsSync } from 'node:fs';
import { PassThrough } from 'node:stream';
import { describe, expect, it } from 'vitest';
import type { CliIo } from '../src/cli/io.js';
import { ExitCode, runCli } from '../src/cli/run.js';
import { SWEEP_NOW, seedBacklog, tally } from './support/backlog.js';
import { freshDbPath, tempDir } from './support/temp.js';

const dir = tempDir('idem-usage-');

function collect(stream: PassThrough): () => string {
  let text = '';
  stream.on('data', (chunk: Buffer) => {
    text += chunk.toString();
  });
  return () => text;
}

async function run(argv: string[]) {
  const stdout = new PassThrough();
  const stderr = new PassThrough();
  const out = collect(stdout);
  const err = collect(stderr);
  const io: CliIo = { stdout, stderr, env: {}, signals: new EventEmitter() };
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

  it('runs a command to completion and resolves with its exit code', async () => {
    const path = freshDbPath(dir);
    seedBacklog(path, { expired: 12, stalePending: 2 });
    const result = await run(['sweep', '--db', path, '--now', String(SWEEP_NOW), '--batch', '5']);
    expect(result.code).toBe(ExitCode.ok);
    expect(JSON.parse(result.stdout)).toMatchObject({ deleted: 12, batches: 3, remaining: 0 });
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
