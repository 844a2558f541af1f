import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';

const run = promisify(execFile);
const root = fileURLToPath(new URL('../..', import.meta.url));
const bun = `${root}node_modules/.bin/bun`;
const vitest = `${root}node_modules/.bin/vitest`;

// The suites written for Bun, run by Bun itself. npm installs bun (a dev dependency) on every
// machine, so a missing binary fails in CI; on a dev machine without it the test is skipped,
// saying why, rather than reported as passed.
const BUN_FILES = [
  'test/store/bun-sqlite-contract.test.ts',
  // The HTTP and function suites over storeFactories(), whose SQLite there is bun:sqlite.
  'test/http/behaviour.test.ts',
  'test/http/wire.test.ts',
  'test/http/lease.test.ts',
  'test/function/make-idempotent.test.ts',
  'test/function/steps-bun.test.ts',
];
const present = existsSync(bun);
if (!present && process.env.CI === undefined) {
  console.warn(`${bun} is missing: the Bun suites (${BUN_FILES.join(', ')}) do not run.`);
}

describe.skipIf(!present && process.env.CI === undefined)('under Bun', () => {
  it('runs the bun:sqlite contract and lease suites and the HTTP and function suites, all passing', async () => {
    expect(present, `${bun} is missing: run npm install`).toBe(true);
    const { stdout } = await run(bun, ['--bun', vitest, 'run', ...BUN_FILES], {
      cwd: root,
      maxBuffer: 64 * 1024 * 1024,
      env: { ...process.env, NO_COLOR: '1', FORCE_COLOR: '0' },
    });
    // Under Node the file only skips: a run where nothing passed would prove nothing.
    expect(stdout).toMatch(/Tests\s+\d+ passed/);
    expect(stdout).not.toMatch(/skipped|failed/);
  }, 600_000);
});
