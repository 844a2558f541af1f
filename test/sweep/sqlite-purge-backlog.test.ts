import { describe, expect, it } from 'vitest';
import { openSqliteStore } from '../../src/sqlite/index.js';
import { freshDbPath, tempDir } from '../support/temp.js';

const dir = tempDir();
const NOW = 500;

// A deterministic shuffle, so ids of every kind interleave in id order as random keys do.
function shuffled<T>(values: T[]): T[] {
  let seed = 12345;
  const result = [...values];
  for (let i = result.length - 1; i > 0; i--) {
    seed = (seed * 1103515245 + 12345) % 2 ** 31;
    const j = seed % (i + 1);
    [result[i], result[j]] = [result[j] as T, result[i] as T];
  }
  return result;
}

// 300 expired answers (one exactly at NOW), 200 live answers, 100 pending rows past their
// deadline: a purge with a small limit meets a backlog far above its sorting threshold (40 per
// id asked for), one with a large limit a backlog below it.
function seededStore() {
  const store = openSqliteStore<number>(freshDbPath(dir));
  const kinds = shuffled([
    ...Array.from({ length: 300 }, () => 'expired' as const),
    ...Array.from({ length: 200 }, () => 'live' as const),
    ...Array.from({ length: 100 }, () => 'pending' as const),
  ]);
  const expired: string[] = [];
  kinds.forEach((kind, i) => {
    const key = `key-${String((i * 7919) % 100_000).padStart(5, '0')}`;
    const deadline =
      kind === 'live' ? NOW + 1 + i : kind === 'pending' ? i : expired.length === 0 ? NOW : i % NOW;
    expect(store.reserve(key, 'd', deadline)).toBe(true);
    if (kind !== 'pending') expect(store.finish(key, 'd', i)).toBe(true);
    if (kind === 'expired') expired.push(key);
  });
  return { store, expired: expired.sort() };
}

describe('expired() and purge() over a backlog above and below the sorting threshold', () => {
  it('list the lowest expired ids in ascending order for every limit', () => {
    const { store, expired } = seededStore();
    for (let limit = 1; limit <= 100; limit++) {
      expect(store.expired(NOW, limit)).toEqual(expired.slice(0, limit));
    }
    store.close();
  });

  it('purge batch by batch in id order, leaving live answers and pending rows', () => {
    const { store, expired } = seededStore();
    const purged: string[] = [];
    for (;;) {
      const batch = store.purge(NOW, 7);
      if (batch.length === 0) break;
      // Each batch is the lowest ids still expired: the backlog shrinks from above the
      // threshold (7 × 40) to below it along the way.
      expect(batch).toEqual(expired.slice(purged.length, purged.length + 7));
      purged.push(...batch);
    }
    expect(purged).toEqual(expired);
    expect(store.counts()).toEqual({ pending: 100, done: 200 });
    expect(store.expired(NOW, 100)).toEqual([]);
    store.close();
  });

  // Both plans give the same ids, so only the statement prepared tells them apart: the walk of
  // done rows by id names the partial index (`indexed by`), the sort of the retention range does
  // not. A count read under a name the driver's row lacks once sent every purge to the sort.
  it.each([
    { limit: 1, backlog: 'above', walksById: true },
    { limit: 100, backlog: 'below', walksById: false },
  ])(
    'with the backlog $backlog 40 per id asked for, walks done rows by id: $walksById',
    ({ limit, walksById }) => {
      const { store, expired } = seededStore();
      const client = store.db.$client;
      const prepared: string[] = [];
      const prepare = client.prepare.bind(client);
      client.prepare = ((source: string) => {
        prepared.push(source);
        return prepare(source);
      }) as typeof client.prepare;
      expect(store.purge(NOW, limit)).toEqual(expired.slice(0, limit));
      expect(prepared.some((source) => /indexed by/i.test(source))).toBe(walksById);
      store.close();
    },
  );
});
