import { describe, expect, it } from 'vitest';
import { SWEEPER_LEASE_KEY } from '../../src/index.js';
import { openSqliteStore } from '../../src/sqlite/index.js';
import { idem, startIdem } from '../support/cli.js';
import { freshDbPath, tempDir } from '../support/temp.js';
import { until } from '../support/waiting.js';

const dir = tempDir('idem-cli-every-');
const now = () => Date.now() / 1000;

describe('idem sweep --every', () => {
  it('sweeps on a schedule as a sidecar until SIGTERM, printing a line per sweep', async () => {
    const path = freshDbPath(dir);
    const store = openSqliteStore(path);
    const seed = (prefix: string) => {
      for (let i = 0; i < 20; i++) {
        store.reserve(`${prefix}-${i}`, 'fp', now() - 10);
        store.finish(`${prefix}-${i}`, 'fp', i);
      }
    };
    seed('first');
    store.reserve('live', 'fp', now() + 3600);
    const { child, result } = startIdem(['sweep', '--db', path, '--every', '100ms', '--json']);
    await until(() => store.stats(now()).expired === 0, 20);
    // A second round: the sidecar keeps sweeping.
    seed('second');
    await until(() => store.stats(now()).expired === 0, 20);
    child.kill('SIGTERM');
    const ended = await result;
    expect(ended.stderr).toBe('');
    expect(ended.code).toBe(0);
    const lines = ended.stdout
      .trim()
      .split('\n')
      .map((line) => JSON.parse(line) as { deleted: number });
    expect(lines.reduce((sum, line) => sum + line.deleted, 0)).toBe(40);
    expect(store.stats(now())).toMatchObject({ pending: 1, done: 0 });
    expect(store.get(SWEEPER_LEASE_KEY)).toBeNull();
    store.close();
  }, 60_000);

  it('refuses a bad duration and flags that only a single sweep takes', async () => {
    const path = freshDbPath(dir);
    openSqliteStore(path).close();
    const bad = await idem(['sweep', '--db', path, '--every', 'soon']);
    expect(bad.code).not.toBe(0);
    expect(bad.stderr).toContain('expected a duration such as 30s, 5m or 1h');
    const both = await idem(['sweep', '--db', path, '--every', '5m', '--dry-run']);
    expect(both.code).not.toBe(0);
    expect(both.stderr).toContain('--dry-run');
  }, 60_000);
});
