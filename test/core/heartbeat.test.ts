import { describe, expect, it } from 'vitest';
import { heartbeat } from '../../src/core/heartbeat.js';

// Waits by condition, never by a fixed time: the beats run on the real clock.
async function until(condition: () => boolean): Promise<void> {
  const deadline = Date.now() + 20_000;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error('condition not met in time');
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}

describe('heartbeat', () => {
  it('renews every owner of one lease length, stops each one alone, and keeps a failing one', async () => {
    const calls = { kept: 0, stopped: 0, refused: 0, failing: 0, later: 0 };
    const kept = heartbeat(async () => {
      calls.kept += 1;
      return true;
    }, 0.03);
    const stopped = heartbeat(async () => {
      calls.stopped += 1;
      return true;
    }, 0.03);
    heartbeat(async () => {
      calls.refused += 1;
      return false;
    }, 0.03);
    const failing = heartbeat(async () => {
      calls.failing += 1;
      throw new Error('the database is away');
    }, 0.03);
    try {
      await until(() => calls.stopped >= 1);
      stopped.stop();
      const stoppedAt = calls.stopped;
      // One that joins while the others beat is renewed too.
      const later = heartbeat(async () => {
        calls.later += 1;
        return true;
      }, 0.03);
      await until(() => calls.kept >= 6 && calls.failing >= 6 && calls.later >= 3);
      later.stop();
      // At most one renewal was already on its way when it stopped.
      expect(calls.stopped).toBeLessThanOrEqual(stoppedAt + 1);
      // A renewal refused by the fencing token stops its beat at once.
      expect(calls.refused).toBe(1);
    } finally {
      kept.stop();
      failing.stop();
    }
  });
});
