import { describe, expect, it } from 'vitest';
import { openSqliteStore } from '../../src/sqlite/index.js';
import { idem } from '../support/cli.js';
import { freshDbPath, tempDir } from '../support/temp.js';

const dir = tempDir('idem-clock-');

// An answer stored a moment ago on the wall clock (in seconds), kept for a day.
function justStored(): string {
  const path = freshDbPath(dir);
  const store = openSqliteStore(path);
  const now = Date.now() / 1000;
  store.reserve('paid', 'f', now + 86_400);
  store.finish('paid', 'f', { receipt: 1 });
  store.close();
  return path;
}

function answerKept(path: string): boolean {
  const store = openSqliteStore(path);
  try {
    return store.get('paid')?.status === 'done';
  } finally {
    store.close();
  }
}

describe('idem --now clock sanity', () => {
  it.each([
    ['milliseconds', () => String(Date.now()), /looks like milliseconds/],
    ['an absurd time', () => '99999999999999999999999', /more than a year after the wall clock/],
    [
      'two years ahead',
      () => String(Math.floor(Date.now() / 1000) + 2 * 366 * 86_400),
      /more than a year/,
    ],
  ])('refuses %s with exit 2 and deletes nothing', async (_name, now, message) => {
    const path = justStored();
    const result = await idem(['sweep', '--db', path, '--now', now()]);
    expect(result.code).toBe(2);
    expect(result.stderr).toMatch(message);
    expect(result.stderr).toContain('--force');
    expect(answerKept(path)).toBe(true);
  });

  it('accepts seconds, and a time refused otherwise with --force', async () => {
    const path = justStored();
    const seconds = await idem(['sweep', '--db', path, '--now', String(Date.now() / 1000)]);
    expect(seconds.code).toBe(0);
    expect(answerKept(path)).toBe(true);
    const forced = await idem(['sweep', '--db', path, '--now', String(Date.now()), '--force']);
    expect(forced.code).toBe(0);
    expect(answerKept(path)).toBe(false);
  });
});
