import { existsSync, mkdtempSync, readdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { expect } from 'vitest';
import { type ChildResult, spawnTs } from './child.js';
import { until } from './waiting.js';

/**
 * Runs several fixtures so that their work overlaps: each child waits at the barrier of
 * test/fixtures/rel-barrier.ts until all of them are ready. Resolves with their results in order.
 */
export async function runTogether(
  jobs: { script: string; args: string[] }[],
  scratchDir: string,
): Promise<ChildResult[]> {
  const barrier = mkdtempSync(join(scratchDir, 'barrier-'));
  const running = jobs.map((job) => spawnTs(job.script, job.args, { REL_BARRIER: barrier }));
  const ended = running.map(() => false);
  running.forEach((run, i) => {
    run.result.then(() => {
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
  return Promise.all(running.map((run) => run.result));
}

/**
 * Runs contending fixtures together (see {@link runTogether}) and reads the JSON report each
 * prints, expecting every child to end cleanly, write nothing to stderr and report no error
 * reaching its caller (no SQLITE_BUSY nor anything else). Resolves with the reports in order.
 */
export async function runContenders<R extends { errors: string[] }>(
  jobs: { script: string; args: string[] }[],
  scratchDir: string,
): Promise<R[]> {
  const reports = (await runTogether(jobs, scratchDir)).map((result) => {
    expect(result.stderr).toBe('');
    expect(result.code).toBe(0);
    return JSON.parse(result.stdout) as R;
  });
  expect(reports.flatMap((report) => report.errors)).toEqual([]);
  return reports;
}
