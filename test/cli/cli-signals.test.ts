import { copyFileSync, existsSync } from 'node:fs';
import Database from 'better-sqlite3';
import { describe, expect, it } from 'vitest';
import { sweep } from '../../src/index.js';
import { openSqliteStore } from '../../src/sqlite/index.js';
import { integrity, SWEEP_NOW, seedBacklog, tally } from '../support/backlog.js';
import type { RunningChild } from '../support/child.js';
import { startIdem } from '../support/cli.js';
import { freshDbPath, tempDir } from '../support/temp.js';
import { until } from '../support/waiting.js';

const dir = tempDir('idem-signals-');
const KEPT = { live: 1_000, pending: 1_000, stalePending: 1_000 };

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * Resolves once the sweep has committed its first batch: `x-0000000` has the lowest `expires`, so
 * the first batch deletes it. Polling the file keeps test hooks out of the CLI.
 */
async function firstBatchCommitted(path: string, running: RunningChild): Promise<void> {
  let exited = false;
  void running.result.then(() => {
    exited = true;
  });
  const client = new Database(path);
  try {
    const probe = client.prepare("SELECT 1 FROM keys WHERE id = 'x-0000000'");
    await until(() => exited || probe.get() === undefined);
  } finally {
    client.close();
  }
}

describe('idem sweep under signals', () => {
  for (const [signal, code] of [
    ['SIGINT', 130],
    ['SIGTERM', 143],
  ] as const) {
    it(`finishes the current batch on ${signal}, prints the summary and exits ${code}`, async () => {
      const path = freshDbPath(dir);
      const backlog = 100_000;
      seedBacklog(path, { expired: backlog, ...KEPT });
      const running = startIdem([
        'sweep',
        '--db',
        path,
        '--now',
        String(SWEEP_NOW),
        '--batch',
        '50',
      ]);
      await firstBatchCommitted(path, running);
      running.child.kill(signal);
      const result = await running.result;

      expect({ code: result.code, stderr: result.stderr }).toEqual({ code, stderr: '' });
      const summary = JSON.parse(result.stdout) as Record<string, number | string>;
      const after = tally(path);
      expect(summary.stoppedBy).toBe('signal');
      expect(summary.deleted).toBe(backlog - after.expired);
      expect(summary.remaining).toBe(after.expired);
      expect(summary.deleted).toBeGreaterThan(0);
      expect(after.expired).toBeGreaterThan(0);
      expect((summary.deleted as number) % 50).toBe(0);
      expect(integrity(path)).toBe('ok');
      expect(after).toMatchObject(KEPT);
    });
  }

  it('survives kill -9 at random moments: whole batches only, pending rows kept', async () => {
    const template = freshDbPath(dir);
    const backlog = 20_000;
    seedBacklog(template, { expired: backlog, ...KEPT });
    expect(existsSync(`${template}-wal`)).toBe(false);
    const batchSizes = [1, 7, 64, 100, 500, 3, 50, 250, 13, 1000];
    const outcomes: { batch: number; gone: number; killed: boolean }[] = [];

    for (const batch of batchSizes) {
      const path = freshDbPath(dir);
      copyFileSync(template, path);
      const running = startIdem([
        'sweep',
        '--db',
        path,
        '--now',
        String(SWEEP_NOW),
        '--batch',
        String(batch),
      ]);
      await firstBatchCommitted(path, running);
      // The kill lands at a random moment of the sweep: the pause is the scenario.
      await sleep(Math.floor(Math.random() * 40));
      running.child.kill('SIGKILL');
      const result = await running.result;

      expect(integrity(path)).toBe('ok');
      const after = tally(path);
      expect(after).toMatchObject(KEPT);
      const gone = backlog - after.expired;
      outcomes.push({ batch, gone, killed: result.signal === 'SIGKILL' });
      expect(gone === backlog || gone % batch === 0, `${gone} rows gone, batch ${batch}`).toBe(
        true,
      );
      if (result.signal !== 'SIGKILL') expect(gone).toBe(backlog);

      // The interrupted sweep is simply run again.
      const store = openSqliteStore(path);
      const rest = await sweep(store, { now: SWEEP_NOW, batchSize: 10_000 });
      store.close();
      expect(rest).toMatchObject({ deleted: backlog - gone, remaining: 0 });
      expect(tally(path)).toEqual({ expired: 0, ...KEPT });
    }
    // Most trials must really have been interrupted, or the test proves nothing.
    expect(
      outcomes.filter((outcome) => outcome.killed && outcome.gone < backlog).length,
    ).toBeGreaterThan(5);
  });
});
