import { openSqliteStore } from '../src/sqlite/index.js';
import { alternate, median, medianRatio, opsPerSecond } from './support/measure.js';
import type { BenchSize, GroupResult } from './support/report.js';
import { benchDir, freshStoreFile } from './support/sqlite-files.js';

/**
 * reserve, finish and fetch of the store against raw better-sqlite3 prepared statements written by
 * hand for the same table, on the same connection (so the same file and pragmas). The raw side
 * does what a careful user would: a prepared statement, `JSON.stringify` before writing,
 * `.pluck()` and `JSON.parse` when reading. The store also validates every argument.
 */
export async function sqliteOps({ quick }: BenchSize): Promise<GroupResult> {
  const count = 2_000;
  const rounds = quick ? 25 : 75;
  const { dir, cleanup } = benchDir();
  const path = freshStoreFile(dir);
  const store = openSqliteStore<{ receipt: number }>(path);
  const cached = openSqliteStore<{ receipt: number }>(path, { answerCacheSize: count });
  const client = store.db.$client;
  const raw = {
    reserve: client.prepare(
      "INSERT INTO keys (id, fingerprint, status, response, expires) VALUES (?, ?, 'pending', NULL, ?) ON CONFLICT DO NOTHING",
    ),
    finish: client.prepare(
      "UPDATE keys SET status = 'done', response = ? WHERE id = ? AND fingerprint = ? AND status = 'pending'",
    ),
    fetch: client
      .prepare("SELECT response FROM keys WHERE id = ? AND status = 'done' AND expires > ?")
      .pluck(),
  };
  const rawFetch = (key: string, now: number) => {
    const text = raw.fetch.get(key, now) as string | null | undefined;
    return text == null ? null : JSON.parse(text);
  };
  const key = (side: string, round: number, index: number) => `${side}-${round}-${index}`;
  try {
    const reserve = await alternate(
      rounds,
      (r) => opsPerSecond(count, (i) => store.reserve(key('o', r, i), 'd', 1e9)),
      (r) => opsPerSecond(count, (i) => raw.reserve.run(key('r', r, i), 'd', 1e9)),
    );
    const finish = await alternate(
      rounds,
      (r) => opsPerSecond(count, (i) => store.finish(key('o', r, i), 'd', { receipt: i })),
      (r) =>
        opsPerSecond(count, (i) =>
          raw.finish.run(JSON.stringify({ receipt: i }), key('r', r, i), 'd'),
        ),
    );
    const fetch = await alternate(
      rounds,
      (r) => opsPerSecond(count, (i) => store.fetch(key('o', r, i), 5)),
      (r) => opsPerSecond(count, (i) => rawFetch(key('r', r, i), 5)),
    );
    const cachedFetch = await alternate(
      rounds,
      (r) => {
        // The first pass fills the cache; the measured one replays hot keys.
        for (let i = 0; i < count; i++) cached.fetch(key('o', r, i), 5);
        return opsPerSecond(count, (i) => cached.fetch(key('o', r, i), 5));
      },
      (r) => opsPerSecond(count, (i) => rawFetch(key('r', r, i), 5)),
    );
    const ratio = medianRatio;
    return {
      metrics: {
        'sqlite.reserve.ratio': ratio(reserve),
        'sqlite.finish.ratio': ratio(finish),
        'sqlite.fetch.ratio': ratio(fetch),
        'sqlite.fetch.cachedRatio': ratio(cachedFetch),
      },
      details: {
        'sqlite.reserve.opsPerSec.store': median(reserve.ours),
        'sqlite.reserve.opsPerSec.raw': median(reserve.theirs),
        'sqlite.finish.opsPerSec.store': median(finish.ours),
        'sqlite.finish.opsPerSec.raw': median(finish.theirs),
        'sqlite.fetch.opsPerSec.store': median(fetch.ours),
        'sqlite.fetch.opsPerSec.raw': median(fetch.theirs),
        'sqlite.fetch.opsPerSec.storeCached': median(cachedFetch.ours),
      },
    };
  } finally {
    cached.close();
    store.close();
    cleanup();
  }
}
