import { type ChildProcessWithoutNullStreams, spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';

/** A benchmark child process running a TypeScript file under tsx. */
export interface BenchChild {
  readonly process: ChildProcessWithoutNullStreams;
  /** Resolves with the first line the child prints. */
  readonly firstLine: Promise<string>;
  /** Resolves with everything the child printed once it exits successfully. */
  readonly output: Promise<string>;
}

/**
 * Starts `bench/children/<name>` with `args` in a new process of the Node binary `node` (default:
 * the one running the benchmark).
 */
export function startChild(name: string, args: string[], node = process.execPath): BenchChild {
  const script = fileURLToPath(new URL(`../children/${name}`, import.meta.url));
  const child = spawn(node, ['--import', 'tsx', script, ...args]);
  let stdout = '';
  let stderr = '';
  let onLine: ((line: string) => void) | undefined;
  const firstLine = new Promise<string>((resolve) => {
    onLine = resolve;
  });
  child.stdout.on('data', (chunk: Buffer) => {
    stdout += chunk.toString();
    const newline = stdout.indexOf('\n');
    if (newline >= 0) onLine?.(stdout.slice(0, newline));
  });
  child.stderr.on('data', (chunk: Buffer) => {
    stderr += chunk.toString();
  });
  const output = new Promise<string>((resolve, reject) => {
    child.on('error', reject);
    child.on('close', (code) =>
      code === 0 ? resolve(stdout) : reject(new Error(`${name} exited with ${code}: ${stderr}`)),
    );
  });
  return { process: child, firstLine, output };
}
