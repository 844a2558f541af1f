import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { ChildResult } from './child.js';

/** A running TypeScript child process and the promise of how it ended. */
export interface RunningChild {
  child: ChildProcess;
  done: Promise<ChildResult>;
  /** Everything printed to stdout so far. */
  stdout(): string;
}

/** Starts a TypeScript file in a real child process (through tsx), collecting its output. */
export function startTs(script: string, args: string[], env: NodeJS.ProcessEnv = {}): RunningChild {
  const child = spawn(process.execPath, ['--import', 'tsx', script, ...args], {
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stdout?.on('data', (chunk: Buffer) => {
    stdout += chunk.toString();
  });
  child.stderr?.on('data', (chunk: Buffer) => {
    stderr += chunk.toString();
  });
  const done = new Promise<ChildResult>((resolve, reject) => {
    child.on('error', reject);
    child.on('close', (code, signal) => resolve({ code, signal, stdout, stderr }));
  });
  return { child, done, stdout: () => stdout };
}

/** Resolves once `predicate` holds, polling every few milliseconds. */
export async function until(predicate: () => boolean): Promise<void> {
  while (!predicate()) await new Promise((resolve) => setTimeout(resolve, 5));
}

/**
 * Runs several fixtures so that their work overlaps: each child waits at the barrier of
 * test/fixtures/rel-barrier.ts until all of them are ready. Resolves with their results in order.
 */
export async function runTogether(
  jobs: { script: string; args: string[] }[],
  scratchDir: string,
): Promise<ChildResult[]> {
  const barrier = mkdtempSync(join(scratchDir, 'barrier-'));
  const running = jobs.map((job) => startTs(job.script, job.args, { REL_BARRIER: barrier }));
  const ended = running.map(() => false);
  running.forEach((run, i) => {
    run.done.then(() => {
      ended[i] = true;
    });
  });
  // A child that dies before reaching the barrier must not hang the others.
  await until(
    () =>
      readdirSync(barrier).filter((name) => name.startsWith('ready-')).length +
        ended.filter(Boolean).length >=
      jobs.length,
  );
  if (!existsSync(join(barrier, 'go'))) writeFileSync(join(barrier, 'go'), '');
  return Promise.all(running.map((run) => run.done));
}
