import { describe, expect, it } from 'vitest';
import { openSqliteStore } from '../../src/sqlite/index.js';
import { fixture } from '../support/child.js';
import { runContenders } from '../support/rel-processes.js';
import { freshDbPath, tempDir } from '../support/temp.js';

const dir = tempDir('idem-lease-');
const PROCESSES = 4;
const KEYS = 200;

describe('lease takeovers across processes (SQLite)', () => {
  it(`${PROCESSES} processes taking over the same ${KEYS} lapsed keys: exactly one winner each`, async () => {
    const path = freshDbPath(dir);
    const setup = openSqliteStore(path);
    const claimed = new Map<string, number>();
    for (let i = 0; i < KEYS; i++) {
      const got = setup.acquire(`key-${i}`, 'd', { expires: 1000, now: 100, leaseSeconds: 30 });
      if (got.status === 'acquired') claimed.set(`key-${i}`, got.fencingToken);
    }
    setup.close();
    const reports = await runContenders<{ won: [string, number][]; errors: string[] }>(
      Array.from({ length: PROCESSES }, (_, i) => ({
        script: fixture('lease-contend.ts'),
        args: [path, String(KEYS), String(i + 1)],
      })),
      dir,
    );
    const winners = new Map<string, number>();
    for (const { won } of reports) {
      for (const [key, token] of won) {
        expect(winners.has(key)).toBe(false);
        expect(token).toBeGreaterThan(claimed.get(key) ?? Infinity);
        winners.set(key, token);
      }
    }
    expect(winners.size).toBe(KEYS);
    const store = openSqliteStore(path);
    for (const row of store.pendingKeys({ now: 200, limit: KEYS })) {
      expect(row.fencingToken).toBe(winners.get(row.key));
    }
    store.close();
  });
});
