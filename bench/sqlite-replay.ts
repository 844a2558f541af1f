import { statSync } from 'node:fs';
import { realisticKeys } from './support/inputs.js';
import { check, median, opsPerSecond, pairedRatio, rotate } from './support/measure.js';
import {
  checkAnswer,
  checkLayerReplay,
  mustNotRun,
  REPLAY_ANSWER,
  replayHandler,
  replayRequest,
} from './support/replay.js';
import type { BenchSize, GroupResult } from './support/report.js';
import { shippedHttp, shippedSqlite } from './support/shipped.js';
import { benchDir, freshStoreFile } from './support/sqlite-files.js';

const { idempotent } = shippedHttp;
const { openSqliteStore } = shippedSqlite;

interface Row {
  readonly response: string;
}

/**
 * The replay of a finished key on the shipped SQLite store (default options: a file in WAL,
 * `synchronous = NORMAL`) against a bare prepared `SELECT *` of the same row with `JSON.parse` of
 * its answer, on the same connection, in rotating rounds over the same finished keys. Beside them,
 * the same replay through the HTTP layer (`idempotent(store).handle`, which claims through the
 * core engine), reported against the same `SELECT`. Every replay checks that it answered the
 * stored answer and ran nothing; after the rounds the WAL must still be empty: no replay wrote.
 */
export async function sqliteReplay({ quick }: BenchSize): Promise<GroupResult> {
  const count = 2_000;
  const rounds = quick ? 15 : 41;
  const { dir, cleanup } = benchDir();
  const path = freshStoreFile(dir);
  const store = openSqliteStore(path);
  const client = store.db.$client;
  const select = client.prepare('SELECT * FROM keys WHERE id = ?');
  const layer = idempotent(store);
  try {
    // Setup, untimed: the store's keys finished by the store, the layer's by a first request.
    const keys = realisticKeys(count);
    for (const { key, fingerprint } of keys) {
      check(store.reserve(key, fingerprint, 1e9), 'reserve');
      check(store.finish(key, fingerprint, REPLAY_ANSWER), 'finish');
    }
    const layerKeys = realisticKeys(count).map(({ key }) => key);
    for (const key of layerKeys) {
      const first = await layer.handle(replayRequest(key), replayHandler);
      check(first.outcome === 'executed', 'first request');
    }
    // An empty WAL now: any replay that commits a write appends to it.
    client.pragma('wal_checkpoint(TRUNCATE)');
    const walBytes = () => statSync(`${path}-wal`).size;
    check(walBytes() === 0, 'WAL truncated before the replays');
    const sides = await rotate(rounds, {
      replay: () =>
        opsPerSecond(count, (i) => {
          const { key, fingerprint } = keys[i] as (typeof keys)[number];
          const got = store.acquire(key, fingerprint, { expires: 1e9, now: 5, leaseSeconds: 30 });
          check(got.status === 'done', 'replay');
          if (got.status === 'done') checkAnswer(got.record.response, 'replayed answer');
        }),
      select: () =>
        opsPerSecond(count, (i) => {
          const row = select.get(keys[i]?.key) as Row | undefined;
          checkAnswer(row === undefined ? null : JSON.parse(row.response), 'selected answer');
        }),
      layer: async () => {
        // The layer is asynchronous; its replays run one after another, as one client's retries.
        const start = performance.now();
        for (const key of layerKeys) {
          checkLayerReplay(await layer.handle(replayRequest(key), mustNotRun));
        }
        return count / ((performance.now() - start) / 1000);
      },
    });
    const walAfter = walBytes();
    check(walAfter === 0, `replays wrote ${walAfter} bytes of WAL`);
    // The probe must see what it looks for: one committed write appends to the WAL.
    client.prepare('UPDATE keys SET expires = expires WHERE id = ?').run(keys[0]?.key);
    check(walBytes() > 0, 'the WAL probe sees a write');
    return {
      metrics: {
        'sqlite.replay.ratio': pairedRatio({ ours: sides.replay, theirs: sides.select }),
        'sqlite.replay.layerRatio': pairedRatio({ ours: sides.layer, theirs: sides.select }),
      },
      details: {
        'sqlite.replay.opsPerSec.store': median(sides.replay),
        'sqlite.replay.opsPerSec.select': median(sides.select),
        'sqlite.replay.opsPerSec.layer': median(sides.layer),
        'sqlite.replay.walBytesAfter': walAfter,
      },
    };
  } finally {
    store.close();
    cleanup();
  }
}
