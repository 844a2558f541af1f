import { expect } from 'vitest';
import { spawnTs } from '../support/child.js';
import { uniqueName } from '../support/pg.js';

const WORKER = new URL('./crash-worker.ts', import.meta.url).pathname;
/** Crashes per dialect. */
export const TRIALS = 20;
// Trials run a few at a time, each on its own keys: a process takes a while to start here.
const PARALLEL = 4;

/** Runs `trial(0..count-1)`, `PARALLEL` at a time. */
export async function inBatches<T>(count: number, trial: () => Promise<T>): Promise<T[]> {
  const results: T[] = [];
  for (let started = 0; started < count; started += PARALLEL) {
    const batch = Math.min(PARALLEL, count - started);
    results.push(...(await Promise.all(Array.from({ length: batch }, trial))));
  }
  return results;
}

/** One key as the database holds it after a crash. */
export interface KeyState {
  readonly key: string;
  readonly status: string | null;
  readonly effects: number;
}

/**
 * Runs the worker until it prints `go`, lets it work for a random few milliseconds, kills it with
 * SIGKILL, and returns the state of every key it touched. On a server, `drained` is first awaited
 * with the ids of the sessions the worker opened: a statement the process sent just before it
 * died still runs on the server, and the state is read only once it has.
 */
export async function crashTrial(
  args: string[],
  read: (prefix: string) => Promise<KeyState[]>,
  drained?: (sessions: number[]) => Promise<void>,
) {
  const prefix = uniqueName('k');
  const running = spawnTs(WORKER, [...args, prefix]);
  await new Promise<void>((resolve, reject) => {
    running.child.stdout?.on('data', (chunk: Buffer) => {
      if (chunk.toString().includes('go')) resolve();
    });
    running.result.then(
      (result) => reject(new Error(`the worker ended before it started: ${result.stderr}`)),
      reject,
    );
  });
  await new Promise((resolve) => setTimeout(resolve, 20 + Math.random() * 200));
  running.child.kill('SIGKILL');
  const ended = await running.result;
  expect(ended.signal).toBe('SIGKILL');
  const sessions = [...ended.stdout.matchAll(/^session (\d+)$/gm)].map((match) => Number(match[1]));
  if (drained) {
    // The worker committed a call before `go`, so it has opened at least one session.
    expect(sessions.length).toBeGreaterThan(0);
    await drained(sessions);
  }
  return read(prefix);
}

// Effect and answer agree: a key whose answer is stored has exactly one effect, every other key
// (pending: claimed, its transaction lost with the process) has none.
export function expectAgreement(states: KeyState[]): { done: number; pending: number } {
  for (const state of states) {
    expect(state, state.key).toEqual({
      key: state.key,
      status: state.status,
      effects: state.status === 'done' ? 1 : 0,
    });
  }
  return {
    done: states.filter((state) => state.status === 'done').length,
    pending: states.filter((state) => state.status === 'pending').length,
  };
}

// Every key the worker touched, from the keys table and the effects table (a full outer join).
export const KEY_STATES = (keys: string, effects: string) => `
  SELECT k.id AS key, k.status AS status,
         (SELECT count(*) FROM ${effects} e WHERE e.key = k.id) AS effects
    FROM ${keys} k WHERE k.id LIKE $prefix
  UNION ALL
  SELECT e.key, NULL, count(*) FROM ${effects} e
   WHERE e.key LIKE $prefix AND NOT EXISTS (SELECT 1 FROM ${keys} k WHERE k.id = e.key)
   GROUP BY e.key`;
