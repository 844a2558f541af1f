import { type ChildProcess, spawn } from 'node:child_process';
import { createRequire } from 'node:module';
import { fileURLToPath, pathToFileURL } from 'node:url';

// Resolved here, not by the child: a child started in another directory must still find tsx.
const TSX_LOADER = pathToFileURL(createRequire(import.meta.url).resolve('tsx')).href;

/** What a child process printed and how it ended. */
export interface ChildResult {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
}

/** A running child process and the promise of how it ends. */
export interface RunningChild {
  child: ChildProcess;
  result: Promise<ChildResult>;
}

/** The absolute path of a fixture script under test/fixtures. */
export function fixture(name: string): string {
  return fileURLToPath(new URL(`../fixtures/${name}`, import.meta.url));
}

/** Starts a TypeScript file in a real child process (through tsx), collecting its output. */
export function spawnTs(
  script: string,
  args: string[],
  env: NodeJS.ProcessEnv = {},
  cwd?: string,
): RunningChild {
  const child = spawn(process.execPath, ['--import', TSX_LOADER, script, ...args], {
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
    cwd,
  });
  const result = new Promise<ChildResult>((resolve, reject) => {
    let stdout = '';
    let stderr = '';
    child.stdout?.on('data', (chunk: Buffer) => {
      stdout += chunk.toString();
    });
    child.stderr?.on('data', (chunk: Buffer) => {
      stderr += chunk.toString();
    });
    child.on('error', reject);
    child.on('close', (code, signal) => resolve({ code, signal, stdout, stderr }));
  });
  return { child, result };
}

/** Runs a TypeScript file in a real child process (through tsx) and collects its output. */
export function runTs(
  script: string,
  args: string[],
  env: NodeJS.ProcessEnv = {},
  cwd?: string,
): Promise<ChildResult> {
  return spawnTs(script, args, env, cwd).result;
}

/**
 * Runs a TypeScript file through `/bin/sh -c`, with `words` pasted after it as an operator would
 * type them: the shell, not the test, splits and unquotes them.
 */
export function runTsInShell(
  script: string,
  words: string,
  env: NodeJS.ProcessEnv = {},
): Promise<ChildResult> {
  const quote = (text: string) => `'${text.replaceAll("'", "'\\''")}'`;
  const command = `exec ${quote(process.execPath)} --import ${quote(TSX_LOADER)} ${quote(script)} ${words}`;
  const child = spawn('/bin/sh', ['-c', command], {
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  return new Promise<ChildResult>((resolve, reject) => {
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk: Buffer) => {
      stdout += chunk.toString();
    });
    child.stderr.on('data', (chunk: Buffer) => {
      stderr += chunk.toString();
    });
    child.on('error', reject);
    child.on('close', (code, signal) => resolve({ code, signal, stdout, stderr }));
  });
}
