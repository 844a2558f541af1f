import Database from 'better-sqlite3';
import { sweep } from '../src/index.js';
import { openSqliteStore } from '../src/sqlite/index.js';
import { median, medianRatio, nowMs } from './support/measure.js';
import type { BenchSize, GroupResult } from './support/report.js';
import {
  benchDir,
  freshStoreFile,
  SEEDED_NOW,
  SWEEP_BATCH,
  seedKeys,
} from './support/sqlite-files.js';

const BACKLOG = 1_000;
const PURGES_PER_ROUND = BACKLOG / 100;

// The same table without the retention index, purged the way code without one does it.
function naivePurger(path: string) {
  const client = new Database(path, { timeout: 5_000 });
  client.pragma('synchronous = NORMAL');
  client.exec(`CREATE TABLE keys_naive (id TEXT PRIMARY KEY, fingerprint TEXT NOT NULL,
    status TEXT NOT NULL, response TEXT, expires REAL NOT NULL);
    INSERT INTO keys_naive SELECT * FROM keys;`);
  const select = client
    .prepare(
      "SELECT id FROM keys_naive WHERE status = 'done' AND expires <= ? ORDER BY id LIMIT 100",
    )
    .pluck();
  const remove = client.prepare(
    'DELETE FROM keys_naive WHERE id IN (SELECT value FROM json_each(?))',
  );
  const purge = client.transaction((now: number) => {
    const ids = select.all(now);
    remove.run(JSON.stringify(ids));
    return ids.length;
  });
  const clear = client.prepare("DELETE FROM keys_naive WHERE status = 'done' AND expires <= ?");
  return {
    purge: (now: number) => purge.immediate(now),
    // Untimed: empties the rest of the backlog in one scan instead of one scan per batch.
    clearBacklog: (now: number) => clear.run(now),
    close: () => client.close(),
  };
}

function timed(op: () => unknown): number {
  const start = nowMs();
  op();
  return nowMs() - start;
}

/**
 * purge(100) latency at two table sizes with the same 1,000-row expired backlog, against a naive
 * select-then-delete on an unindexed copy of the big table; and the time `sweep()` (batches of
 * SWEEP_BATCH) takes for a 100k and a 200k backlog in a table of the same total size.
 */
export async function sqliteRetention({ quick }: BenchSize): Promise<GroupResult> {
  const small = 10_000;
  const big = quick ? 200_000 : 1_000_000;
  const rounds = quick ? 3 : 7;
  const { dir, cleanup } = benchDir();
  try {
    const smallPath = freshStoreFile(dir);
    const bigPath = freshStoreFile(dir);
    seedKeys(smallPath, 'live', small - BACKLOG, 'live');
    seedKeys(bigPath, 'live', big - BACKLOG, 'live');
    seedKeys(smallPath, 'x0-', BACKLOG, 'expired');
    seedKeys(bigPath, 'x0-', BACKLOG, 'expired');
    const naive = naivePurger(bigPath);
    const smallStore = openSqliteStore(smallPath);
    const bigStore = openSqliteStore(bigPath);
    const latencies = { small: [] as number[], big: [] as number[], naive: [] as number[] };
    for (let round = 0; round < rounds; round++) {
      if (round > 0) {
        seedKeys(smallPath, `x${round}-`, BACKLOG, 'expired');
        seedKeys(bigPath, `x${round}-`, BACKLOG, 'expired');
        seedKeys(bigPath, `x${round}-`, BACKLOG, 'expired', 'keys_naive');
      }
      const sides = [
        () => {
          for (let i = 0; i < PURGES_PER_ROUND; i++)
            latencies.small.push(timed(() => smallStore.purge(SEEDED_NOW, 100)));
        },
        () => {
          for (let i = 0; i < PURGES_PER_ROUND; i++)
            latencies.big.push(timed(() => bigStore.purge(SEEDED_NOW, 100)));
        },
        () => {
          // Each naive batch scans the whole table: three samples a round are plenty.
          for (let i = 0; i < 3; i++) latencies.naive.push(timed(() => naive.purge(SEEDED_NOW)));
          naive.clearBacklog(SEEDED_NOW);
        },
      ];
      for (let i = 0; i < sides.length; i++) sides[(i + round) % sides.length]?.();
    }
    naive.close();
    smallStore.close();
    bigStore.close();

    const swept = await sweepTimes(freshStoreFile(dir), quick);
    return {
      metrics: {
        'sqlite.purge100.scale': median(latencies.big) / median(latencies.small),
        'sqlite.purge100.vsNaive': median(latencies.naive) / median(latencies.big),
        'sqlite.sweep.linearity': medianRatio({ ours: swept.double, theirs: swept.single }),
        'sqlite.sweep.rowsPerSec': (swept.backlog * 2) / (median(swept.double) / 1000),
      },
      details: {
        'sqlite.purge100.ms.small': median(latencies.small),
        'sqlite.purge100.ms.big': median(latencies.big),
        'sqlite.purge100.ms.naive': median(latencies.naive),
        'sqlite.purge100.rows.small': small,
        'sqlite.purge100.rows.big': big,
        'sqlite.sweep.ms.single': median(swept.single),
        'sqlite.sweep.ms.double': median(swept.double),
        'sqlite.sweep.plainRowidDeletes.linearity': medianRatio({
          ours: swept.plainDouble,
          theirs: swept.plainSingle,
        }),
        'sqlite.sweep.backlog.single': swept.backlog,
        'sqlite.sweep.tableRows': swept.total,
      },
    };
  } finally {
    cleanup();
  }
}

// Sweeps of a backlog and of twice that backlog, alternately, in a table kept at the same total
// size by adding live filler rows to the smaller case.
async function sweepTimes(path: string, quick: boolean) {
  const total = quick ? 200_000 : 1_000_000;
  const backlog = quick ? 20_000 : 100_000;
  const rounds = quick ? 2 : 3;
  seedKeys(path, 'base', total - 2 * backlog, 'live');
  const store = openSqliteStore(path);
  const times = {
    single: [] as number[],
    double: [] as number[],
    plainSingle: [] as number[],
    plainDouble: [] as number[],
  };
  const client = store.db.$client;
  const seededRowids = client.prepare(
    'SELECT min(rowid) AS first, max(rowid) AS last FROM keys WHERE id >= ? AND id < ?',
  );
  const deleteRowids = client.prepare('DELETE FROM keys WHERE rowid >= ? AND rowid < ?');
  // The reference: the same rows deleted by plain rowid ranges of the same size, no retention
  // query at all. Whatever scaling it shows belongs to SQLite deleting those rows, not to the sweep.
  const plainDeletes = (prefix: string) => {
    const { first, last } = seededRowids.get(prefix, `${prefix}~`) as {
      first: number;
      last: number;
    };
    return timed(() => {
      for (let rowid = first; rowid <= last; rowid += SWEEP_BATCH) {
        store.db.transaction(() => deleteRowids.run(rowid, rowid + SWEEP_BATCH), {
          behavior: 'immediate',
        });
      }
    });
  };
  const sweepAll = async () => {
    const start = nowMs();
    const result = await sweep(store, { now: SEEDED_NOW, batchSize: SWEEP_BATCH });
    if (result.remaining !== 0) throw new Error(`the sweep left ${result.remaining} rows`);
    return nowMs() - start;
  };
  for (let round = 0; round < rounds; round++) {
    for (const size of round % 2 === 0 ? [1, 2] : [2, 1]) {
      const filler = `f${round}-${size}-`;
      seedKeys(path, `s${round}-${size}-`, size * backlog, 'expired');
      if (size === 1) seedKeys(path, filler, backlog, 'live');
      (size === 1 ? times.single : times.double).push(await sweepAll());
      const plain = `p${round}-${size}-`;
      seedKeys(path, plain, size * backlog, 'expired');
      (size === 1 ? times.plainSingle : times.plainDouble).push(plainDeletes(plain));
      if (size === 1) {
        store.db.$client
          .prepare('DELETE FROM keys WHERE id >= ? AND id < ?')
          .run(filler, `${filler}~`);
      }
    }
  }
  store.close();
  return { ...times, backlog, total };
}
