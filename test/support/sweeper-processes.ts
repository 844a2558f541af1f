import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'vitest';
import { type LeasedIdempotencyStore, SWEEPER_LEASE_KEY } from '../../src/index.js';
import { fixture, spawnTs } from './child.js';
import { until } from './waiting.js';

/** Where the children of test/fixtures/sweeper-child.ts sweep. */
export interface SweeperTarget {
  readonly dialect: 'sqlite' | 'pg' | 'mysql';
  /** The SQLite file, or the server's URL (through a pooler, if that is what is tested). */
  readonly location: string;
  /** The PostgreSQL schema. */
  readonly schema?: string;
}

interface Batch {
  readonly pid: number;
  readonly start: number;
  readonly end: number;
  readonly deleted: number;
}

const ROUNDS = 3;
const ROWS_PER_ROUND = 40;
const LIVE_ROWS = 5;

/**
 * Starts `processes` sweepers in child processes on `target`, seeds expired answers in rounds
 * through `store` (already migrated, on the same database) and waits for each round to be swept;
 * then stops the children and checks that no two of their batches overlapped in time (at most one
 * sweeps at once), that every expired row went exactly once, that live rows stayed, that no child
 * reported an error and that the sweeper's lease row is gone.
 */
export async function expectOneSweeperAtATime(
  store: LeasedIdempotencyStore,
  target: SweeperTarget,
  processes = 3,
): Promise<void> {
  const ready = mkdtempSync(join(tmpdir(), 'idem-sweepers-'));
  const now = () => Date.now() / 1000;
  for (let i = 0; i < LIVE_ROWS; i++) {
    await store.reserve(`live-${i}`, 'fp', now() + 86_400);
    await store.finish(`live-${i}`, 'fp', { i });
  }
  const children = Array.from({ length: processes }, () =>
    spawnTs(fixture('sweeper-child.ts'), [JSON.stringify(target), ready]),
  );
  let exited = 0;
  for (const child of children) child.result.then(() => exited++);
  try {
    await until(() => readdirSync(ready).length + exited >= processes, 20);
    expect(exited).toBe(0);
    for (let round = 0; round < ROUNDS; round++) {
      for (let i = 0; i < ROWS_PER_ROUND; i++) {
        const key = `expired-${round}-${i}`;
        await store.reserve(key, 'fp', now() - 100);
        await store.finish(key, 'fp', { round, i });
      }
      await until(async () => (await store.stats(now())).expired === 0, 20);
    }
  } finally {
    for (const { child } of children) child.kill('SIGTERM');
  }
  const results = await Promise.all(children.map((child) => child.result));
  rmSync(ready, { recursive: true, force: true });
  const reports = results.map((result) => {
    expect(result.code, result.stderr).toBe(0);
    return JSON.parse(result.stdout) as { batches: Batch[]; errors: string[] };
  });
  expect(reports.flatMap((report) => report.errors)).toEqual([]);
  const batches = reports.flatMap((report) => report.batches).sort((a, b) => a.start - b.start);
  const overlapping = batches.filter(
    (batch, i) => i > 0 && batch.start < (batches[i - 1] as Batch).end,
  );
  expect(overlapping).toEqual([]);
  expect(batches.reduce((sum, batch) => sum + batch.deleted, 0)).toBe(ROUNDS * ROWS_PER_ROUND);
  const stats = await store.stats(now());
  expect(stats).toMatchObject({ expired: 0, done: LIVE_ROWS, pending: 0 });
  expect(await store.get(SWEEPER_LEASE_KEY)).toBeNull();
}
