import { copyFileSync } from 'node:fs';
import Database from 'better-sqlite3';
import type { SqliteIdempotencyStore } from '../src/sqlite/index.js';
import { answerOfSize, realisticKeys } from './support/inputs.js';
import {
  alternate,
  check,
  median,
  medianWithInterval,
  nowMs,
  opsPerSecond,
  pairedRatio,
  ratioOfMedians,
} from './support/measure.js';
import type { BenchSize, GroupResult } from './support/report.js';
import { shippedCore, shippedSqlite } from './support/shipped.js';
import {
  benchDir,
  DONE_INDEX,
  freshStoreFile,
  SEEDED_NOW,
  SWEEP_BATCH,
  seedKeys,
} from './support/sqlite-files.js';

const { sweep } = shippedCore;
const { openSqliteStore } = shippedSqlite;

const SMALL_BACKLOG = 1_000;
const PURGES_PER_ROUND = SMALL_BACKLOG / 100;

// A copy of the table as code without the library would keep it: an index on `expires` only, and
// the purge written the obvious way, select then delete in one transaction.
function naivePurger(path: string) {
  const client = new Database(path, { timeout: 5_000 });
  client.pragma('synchronous = NORMAL');
  client.exec(`CREATE TABLE keys_naive (id TEXT PRIMARY KEY, fingerprint TEXT NOT NULL,
    status TEXT NOT NULL, response TEXT, expires REAL NOT NULL);
    CREATE INDEX keys_naive_expires ON keys_naive (expires);
    INSERT INTO keys_naive SELECT id, fingerprint, status, response, expires FROM keys;`);
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
    return remove.run(JSON.stringify(ids)).changes;
  });
  const clear = client.prepare("DELETE FROM keys_naive WHERE status = 'done' AND expires <= ?");
  return {
    purge: (now: number) => check(purge.immediate(now) === 100, 'naive purge'),
    // Untimed: empties the rest of the backlog, so every round starts from the same backlog.
    clearBacklog: (now: number) => clear.run(now),
    close: () => client.close(),
  };
}

function timed(op: () => unknown): number {
  const start = nowMs();
  op();
  return nowMs() - start;
}

function purgeBatches(store: SqliteIdempotencyStore<unknown>, into: number[]): void {
  for (let i = 0; i < PURGES_PER_ROUND; i++) {
    into.push(timed(() => check(store.purge(SEEDED_NOW, 100).length === 100, 'purge')));
  }
}

// The floor of a purge: deleting the same 100 ids, handed over ready-made (the store picks them,
// untimed), in one transaction of one plain statement. What this costs in each table is what the
// pages the rows sit on cost, whatever chose them.
// It brings its own rows (seeded untimed), so the purges of the round still find their backlog.
function deleteBatches(path: string, store: SqliteIdempotencyStore<unknown>, into: number[]): void {
  seedKeys(path, SMALL_BACKLOG, 'expired');
  const client = store.db.$client;
  const remove = client.prepare('DELETE FROM keys WHERE id IN (SELECT value FROM json_each(?))');
  const removeAll = client.transaction((ids: string) => remove.run(ids).changes);
  for (let i = 0; i < PURGES_PER_ROUND; i++) {
    const ids = JSON.stringify(store.expired(SEEDED_NOW, 100));
    into.push(timed(() => check(removeAll.immediate(ids) === 100, 'plain delete')));
  }
}

/**
 * purge(100) latency: with the same 1,000-row backlog in a small and a big table; with a 1,000 and
 * a 100,000-row backlog in tables of the same big size; against the plain DELETE of 100 ready-made
 * ids in the same big table (the floor); against a naive purge (index on `expires`, `ORDER BY id`)
 * of a copy of the big table. Then how the time `sweep()` spends in its batches
 * grows from a backlog to twice that backlog in a table of the same total size.
 */
export async function sqliteRetention({ quick }: BenchSize): Promise<GroupResult> {
  const small = 10_000;
  const big = quick ? 200_000 : 1_000_000;
  const largeBacklog = quick ? 20_000 : 100_000;
  const rounds = quick ? 5 : 7;
  const { dir, cleanup } = benchDir();
  try {
    const smallPath = freshStoreFile(dir);
    const bigPath = freshStoreFile(dir);
    const backlogPath = freshStoreFile(dir);
    seedKeys(smallPath, small - SMALL_BACKLOG, 'live');
    seedKeys(bigPath, big - SMALL_BACKLOG, 'live');
    seedKeys(backlogPath, big - largeBacklog, 'live');
    seedKeys(smallPath, SMALL_BACKLOG, 'expired');
    seedKeys(bigPath, SMALL_BACKLOG, 'expired');
    seedKeys(backlogPath, largeBacklog, 'expired');
    const naive = naivePurger(bigPath);
    const stores = {
      small: openSqliteStore(smallPath),
      big: openSqliteStore(bigPath),
      backlog: openSqliteStore(backlogPath),
    };
    const latencies = {
      small: [] as number[],
      big: [] as number[],
      backlog: [] as number[],
      naive: [] as number[],
      sortedSelect: [] as number[],
      deleteSmall: [] as number[],
      deleteBig: [] as number[],
    };
    // The candidate query the store used before: the retention index's range, sorted by id. Only
    // selected, nothing deleted, on the large backlog: what choosing the plan per call saves.
    const sortedSelect = stores.backlog.db.$client
      .prepare('SELECT id FROM keys WHERE status = ? AND expires <= ? ORDER BY id LIMIT 100')
      .pluck();
    for (let round = 0; round < rounds; round++) {
      if (round > 0) {
        // Put back what the previous round purged, so every round starts from the same backlogs.
        seedKeys(smallPath, SMALL_BACKLOG, 'expired');
        seedKeys(bigPath, SMALL_BACKLOG, 'expired');
        seedKeys(backlogPath, SMALL_BACKLOG, 'expired');
        seedKeys(bigPath, SMALL_BACKLOG, 'expired', 'keys_naive');
      }
      const sides = [
        () => purgeBatches(stores.small, latencies.small),
        () => purgeBatches(stores.big, latencies.big),
        () => purgeBatches(stores.backlog, latencies.backlog),
        () => deleteBatches(smallPath, stores.small, latencies.deleteSmall),
        () => deleteBatches(bigPath, stores.big, latencies.deleteBig),
        () => {
          for (let i = 0; i < 3; i++) {
            latencies.sortedSelect.push(
              timed(() => check(sortedSelect.all('done', SEEDED_NOW).length === 100, 'select')),
            );
          }
        },
        () => {
          // Each naive batch sorts the whole backlog: three samples a round are plenty.
          for (let i = 0; i < 3; i++) latencies.naive.push(timed(() => naive.purge(SEEDED_NOW)));
          naive.clearBacklog(SEEDED_NOW);
        },
      ];
      for (let i = 0; i < sides.length; i++) sides[(i + round) % sides.length]?.();
    }
    naive.close();
    // What one purge writes: WAL frames (pages) of one more purge(100) in each table, from an
    // empty WAL. Deleting 100 random ids touches pages all over each b-tree of a big table.
    const framesPerPurge = (path: string, store: SqliteIdempotencyStore<unknown>) => {
      seedKeys(path, 100, 'expired');
      store.db.$client.pragma('wal_checkpoint(TRUNCATE)');
      check(store.purge(SEEDED_NOW, 100).length === 100, 'purge');
      const [wal] = store.db.$client.pragma('wal_checkpoint(PASSIVE)') as { log: number }[];
      return wal?.log ?? 0;
    };
    const frames = {
      small: framesPerPurge(smallPath, stores.small),
      big: framesPerPurge(bigPath, stores.big),
      backlog: framesPerPurge(backlogPath, stores.backlog),
    };
    for (const store of Object.values(stores)) store.close();

    const swept = await sweepTimes(freshStoreFile(dir), quick);
    const indexCost = await finishDoneIndexCost(dir, big, quick);
    const linearity = pairedRatio({ ours: swept.double, theirs: swept.single });
    const perRound = swept.double.map((ms, i) => ms / (swept.single[i] as number));
    return {
      metrics: {
        'sqlite.purge100.scale': ratioOfMedians(latencies.big, latencies.small),
        'sqlite.purge100.backlogScale': ratioOfMedians(latencies.backlog, latencies.big),
        'sqlite.purge100.vsNaive': ratioOfMedians(latencies.naive, latencies.big),
        // Our purge against the plain DELETE of the same number of ready-made ids in the same big
        // table: what choosing the rows and repeating the predicate add to deleting them.
        'sqlite.purge100.vsDeleteFloor': ratioOfMedians(latencies.big, latencies.deleteBig),
        'sqlite.purge100.deleteFloorScale': ratioOfMedians(
          latencies.deleteBig,
          latencies.deleteSmall,
        ),
        'sqlite.finish.bigTable.doneIndexCost': indexCost.ratio,
        'sqlite.sweep.linearity': linearity,
        'sqlite.sweep.rowsPerSec': medianWithInterval(
          swept.double.map((ms) => (swept.backlog * 2) / (ms / 1000)),
        ),
      },
      details: {
        'sqlite.purge100.ms.small': median(latencies.small),
        'sqlite.purge100.ms.big': median(latencies.big),
        'sqlite.purge100.ms.bigLargeBacklog': median(latencies.backlog),
        'sqlite.purge100.ms.naive': median(latencies.naive),
        'sqlite.purge100.ms.sortedSelectLargeBacklog': median(latencies.sortedSelect),
        'sqlite.purge100.ms.plainDelete.small': median(latencies.deleteSmall),
        'sqlite.purge100.ms.plainDelete.big': median(latencies.deleteBig),
        'sqlite.purge100.walFrames.small': frames.small,
        'sqlite.purge100.walFrames.big': frames.big,
        'sqlite.purge100.walFrames.bigLargeBacklog': frames.backlog,
        'sqlite.finish.bigTable.opsPerSec.withDoneIndex': indexCost.indexed,
        'sqlite.finish.bigTable.opsPerSec.withoutDoneIndex': indexCost.plain,
        'sqlite.purge100.rows.small': small,
        'sqlite.purge100.rows.big': big,
        'sqlite.purge100.backlog.large': largeBacklog,
        'sqlite.sweep.ms.single': median(swept.single),
        'sqlite.sweep.ms.double': median(swept.double),
        'sqlite.sweep.linearity.rounds': perRound.length,
        'sqlite.sweep.linearity.min': Math.min(...perRound),
        'sqlite.sweep.linearity.max': Math.max(...perRound),
        'sqlite.sweep.plainRowidDeletes.linearity': pairedRatio({
          ours: swept.plainDouble,
          theirs: swept.plainSingle,
        }).value,
        'sqlite.sweep.backlog.single': swept.backlog,
        'sqlite.sweep.tableRows': swept.total,
      },
    };
  } finally {
    cleanup();
  }
}

// Sweeps of a backlog and of twice that backlog, alternately, in a table kept at the same total
// size by adding live filler rows to the smaller case. Only the batch loop is timed: from the
// first progress callback to the last, scaled by batches ÷ (batches − 1) for the first batch, so
// the `stats()` counts the sweep makes before and after its batches are left out.
async function sweepTimes(path: string, quick: boolean) {
  const total = quick ? 200_000 : 1_000_000;
  const backlog = quick ? 20_000 : 100_000;
  const rounds = 5;
  seedKeys(path, total - 2 * backlog, 'live');
  const store = openSqliteStore(path);
  const times = {
    single: [] as number[],
    double: [] as number[],
    plainSingle: [] as number[],
    plainDouble: [] as number[],
  };
  const client = store.db.$client;
  const deleteRowids = client.prepare('DELETE FROM keys WHERE rowid >= ? AND rowid < ?');
  // The reference: the same number of rows deleted by plain rowid ranges of the same size, no
  // retention query at all. Whatever scaling it shows belongs to SQLite deleting those rows.
  const plainDeletes = (rows: { first: number; last: number }) =>
    timed(() => {
      for (let rowid = rows.first; rowid <= rows.last; rowid += SWEEP_BATCH) {
        store.db.transaction(() => deleteRowids.run(rowid, rowid + SWEEP_BATCH), {
          behavior: 'immediate',
        });
      }
    });
  const sweepLoop = async (rows: number) => {
    let first = 0;
    let last = 0;
    const result = await sweep(store, {
      now: SEEDED_NOW,
      onBatch: () => {
        last = nowMs();
        if (first === 0) first = last;
      },
    });
    check(result.deleted === rows && result.remaining === 0, 'sweep');
    return (last - first) * (result.batches / (result.batches - 1));
  };
  for (let round = 0; round < rounds; round++) {
    for (const size of round % 2 === 0 ? [1, 2] : [2, 1]) {
      seedKeys(path, size * backlog, 'expired');
      const filler = size === 1 ? seedKeys(path, backlog, 'live') : undefined;
      (size === 1 ? times.single : times.double).push(await sweepLoop(size * backlog));
      const plain = seedKeys(path, size * backlog, 'expired');
      (size === 1 ? times.plainSingle : times.plainDouble).push(plainDeletes(plain));
      if (filler) deleteRowids.run(filler.first, filler.last + 1);
    }
  }
  store.close();
  return { ...times, backlog, total };
}

/**
 * What the partial index of done rows (migration 0002, which keeps purge flat in the backlog)
 * costs the request path: `finish` (the store's UPDATE, 1 KB answers, one commit each) in a table
 * of `rows` live rows with the index, over the same on a copy of the file without it, alternating.
 * Both sides run the same plain statement, since the store itself expects its index.
 */
async function finishDoneIndexCost(dir: string, rows: number, quick: boolean) {
  const withIndex = freshStoreFile(dir);
  seedKeys(withIndex, rows, 'live');
  const withoutIndex = `${withIndex}-without-done-index`;
  copyFileSync(withIndex, withoutIndex);
  const count = 1_000;
  const answer = JSON.stringify(answerOfSize(1024, 0));
  const side = (path: string, dropIndex: boolean) => {
    const client = new Database(path, { timeout: 5_000 });
    client.pragma('journal_mode = WAL');
    client.pragma('synchronous = NORMAL');
    if (dropIndex) client.exec(`DROP INDEX ${DONE_INDEX}`);
    const reserve = client.prepare(
      "INSERT INTO keys (id, fingerprint, status, expires) VALUES (?, ?, 'pending', 1e9)",
    );
    const finish = client.prepare(
      "UPDATE keys SET status = 'done', response = ? WHERE id = ? AND fingerprint = ? AND status = 'pending'",
    );
    return {
      run: () => {
        const inputs = realisticKeys(count);
        for (const { key, fingerprint } of inputs) reserve.run(key, fingerprint);
        return opsPerSecond(count, (i) => {
          const { key, fingerprint } = inputs[i] as { key: string; fingerprint: string };
          check(finish.run(answer, key, fingerprint).changes === 1, 'finish');
        });
      },
      close: () => client.close(),
    };
  };
  const indexed = side(withIndex, false);
  const plain = side(withoutIndex, true);
  try {
    const sides = await alternate(quick ? 9 : 21, indexed.run, plain.run);
    return {
      ratio: pairedRatio(sides),
      indexed: median(sides.ours),
      plain: median(sides.theirs),
    };
  } finally {
    indexed.close();
    plain.close();
  }
}
