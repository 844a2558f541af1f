import { fileURLToPath } from 'node:url';
import { type ChildResult, type RunningChild, runTs, spawnTs } from './child.js';

/** The CLI's entry point, run from source through tsx as `npm run idem` does. */
export const CLI_MAIN = fileURLToPath(new URL('../../src/cli/main.ts', import.meta.url));

/** Runs `idem ...args` in a child process and waits for it to end. */
export function idem(
  args: string[],
  env: NodeJS.ProcessEnv = {},
  cwd?: string,
): Promise<ChildResult> {
  return runTs(CLI_MAIN, args, { IDEM_DB: '', ...env }, cwd);
}

/** Starts `idem ...args` in a child process without waiting. */
export function startIdem(args: string[]): RunningChild {
  return spawnTs(CLI_MAIN, args, { IDEM_DB: '' });
}

/** Parses the single JSON line a `--json` command prints. */
export function jsonLine(result: ChildResult): Record<string, unknown> {
  const lines = result.stdout.trim().split('\n');
  if (lines.length !== 1) throw new Error(`expected one line of JSON, got: ${result.stdout}`);
  return JSON.parse(lines[0] ?? '') as Record<string, unknown>;
}
