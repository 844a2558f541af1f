import { fileURLToPath } from 'node:url';
import { type ChildResult, type RunningChild, runTs, runTsInShell, spawnTs } from './child.js';

/** The CLI's entry point, run from source through tsx as `npm run idem` does. */
const CLI_MAIN = fileURLToPath(new URL('../../src/cli/main.ts', import.meta.url));

// The test run's own DATABASE_URL (set to run the server tests) must not choose the store of a
// CLI child: each test names its store, or sets these variables itself.
const NO_STORE_ENV = { IDEM_DB: '', DATABASE_URL: '' };

/** Runs `idem ...args` in a child process and waits for it to end. */
export function idem(
  args: string[],
  env: NodeJS.ProcessEnv = {},
  cwd?: string,
): Promise<ChildResult> {
  return runTs(CLI_MAIN, args, { ...NO_STORE_ENV, ...env }, cwd);
}

/**
 * Runs `idem <words>` through `/bin/sh`, `words` pasted as an operator pastes them (the shell
 * splits and unquotes them), and waits for it to end.
 */
export function idemInShell(words: string, env: NodeJS.ProcessEnv = {}): Promise<ChildResult> {
  return runTsInShell(CLI_MAIN, words, { ...NO_STORE_ENV, ...env });
}

/** Starts `idem ...args` in a child process without waiting. */
export function startIdem(args: string[], env: NodeJS.ProcessEnv = {}): RunningChild {
  return spawnTs(CLI_MAIN, args, { ...NO_STORE_ENV, ...env });
}

/** Parses the single JSON line a `--json` command prints. */
export function jsonLine(result: ChildResult): Record<string, unknown> {
  const lines = result.stdout.trim().split('\n');
  if (lines.length !== 1) throw new Error(`expected one line of JSON, got: ${result.stdout}`);
  return JSON.parse(lines[0] ?? '') as Record<string, unknown>;
}
