import pg from 'pg';
import { type JsonObject, realisticKeys } from './support/inputs.js';
import { check, median, pairedRatio, rotate } from './support/measure.js';
import {
  checkAnswer,
  checkLayerReplay,
  mustNotRun,
  REPLAY_ANSWER,
  replayHandler,
  replayRequest,
} from './support/replay.js';
import type { BenchSize, GroupResult } from './support/report.js';
import { IN_FLIGHT, opsPerSecondConcurrent } from './support/server-ops.js';
import { shippedHttp, shippedPg } from './support/shipped.js';

const { idempotent } = shippedHttp;
const { openPgStore } = shippedPg;

const URL = 'postgres://postgres@127.0.0.1:5432/test';

/** A row's version: `xmin` changes when it is written, `xmax` also when it is locked. */
type Versions = Map<string, string>;

async function versions(pool: pg.Pool, schema: string, ids: readonly string[]): Promise<Versions> {
  const { rows } = await pool.query<{ id: string; v: string }>(
    `SELECT id, xmin::text || '/' || xmax::text AS v FROM "${schema}".keys WHERE id = ANY($1::text[])`,
    [ids],
  );
  check(rows.length === ids.length, 'every replayed row is there');
  return new Map(rows.map((row) => [row.id, row.v]));
}

// The rows whose version differs from `before`.
function changed(before: Versions, after: Versions): number {
  let count = 0;
  for (const [id, version] of before) if (after.get(id) !== version) count += 1;
  return count;
}

/**
 * Replays of finished keys on the PostgreSQL store. First the write check: each of `count` keys
 * is replayed once through the store's `acquire` and `count` others once through the HTTP layer
 * (`idempotent(store).handle`), one at a time, and after each replay its row's `xmin`/`xmax` is
 * read: `pg.replay.rowWrites` is how many replays changed them (a write or a row lock would).
 * Then the store's replay against a bare named prepared `SELECT *` of the same row with
 * `JSON.parse` of its answer, and the layer's beside them, in rotating rounds on one pool with
 * {@link IN_FLIGHT} in flight; after the rounds every row's version is compared once more.
 */
export async function pgReplay({ quick }: BenchSize): Promise<GroupResult> {
  const count = 1_000;
  const rounds = quick ? 9 : 41;
  const schema = `bench_replay_${process.pid}`;
  const pool = new pg.Pool({ connectionString: URL, max: IN_FLIGHT });
  const store = await openPgStore<JsonObject>(pool, { schema });
  const layer = idempotent(store);
  const select = {
    name: 'bench_replay_select',
    text: `SELECT * FROM "${schema}".keys WHERE id = $1`,
  };
  try {
    // Setup, untimed: the store's keys finished by the store, the layer's by a first request.
    const keys = realisticKeys(count);
    for (const { key, fingerprint } of keys) {
      check(await store.reserve(key, fingerprint, 1e9), 'reserve');
      check(await store.finish(key, fingerprint, REPLAY_ANSWER), 'finish');
    }
    const layerKeys = realisticKeys(count).map(({ key }) => key);
    for (const key of layerKeys) {
      const first = await layer.handle(replayRequest(key), replayHandler);
      check(first.outcome === 'executed', 'first request');
    }
    const ids = [...keys.map(({ key }) => key), ...layerKeys];
    const before = await versions(pool, schema, ids);
    const replayStore = async (i: number) => {
      const { key, fingerprint } = keys[i] as (typeof keys)[number];
      const got = await store.acquire(key, fingerprint, { expires: 1e9, now: 5, leaseSeconds: 30 });
      check(got.status === 'done', 'replay');
      if (got.status === 'done') checkAnswer(got.record.response, 'replayed answer');
    };
    const replayLayer = async (i: number) => {
      checkLayerReplay(await layer.handle(replayRequest(layerKeys[i] ?? ''), mustNotRun));
    };
    let rowWrites = 0;
    for (let i = 0; i < count; i++) {
      await replayStore(i);
      await replayLayer(i);
      const pair = [keys[i]?.key ?? '', layerKeys[i] ?? ''];
      const now = await versions(pool, schema, pair);
      for (const id of pair) if (now.get(id) !== before.get(id)) rowWrites += 1;
    }
    const sides = await rotate(rounds, {
      replay: () => opsPerSecondConcurrent(count, replayStore),
      select: () =>
        opsPerSecondConcurrent(count, async (i) => {
          const { rows } = await pool.query<{ response: string }>({
            ...select,
            values: [keys[i]?.key],
          });
          const text = rows[0]?.response;
          checkAnswer(text === undefined ? null : JSON.parse(text), 'selected answer');
        }),
      layer: () => opsPerSecondConcurrent(count, replayLayer),
    });
    const rowsChangedByRounds = changed(before, await versions(pool, schema, ids));
    // The probe must see what it looks for: an upsert whose update is skipped changes no column
    // but locks the row, which sets its xmax.
    const probed = keys[0]?.key ?? '';
    await pool.query(
      `INSERT INTO "${schema}".keys (id, fingerprint, status, expires) VALUES ($1, 'x', 'pending', 1)
       ON CONFLICT (id) DO UPDATE SET expires = excluded.expires WHERE false`,
      [probed],
    );
    const probe = await versions(pool, schema, [probed]);
    check(probe.get(probed) !== before.get(probed), 'the version probe sees a locking upsert');
    return {
      metrics: {
        'pg.replay.rowWrites': { value: rowWrites, low: rowWrites, high: rowWrites },
        'pg.replay.ratio': pairedRatio({ ours: sides.replay, theirs: sides.select }),
        'pg.replay.layerRatio': pairedRatio({ ours: sides.layer, theirs: sides.select }),
      },
      details: {
        'pg.replay.checkedReplays': 2 * count,
        'pg.replay.rowsChangedByTimedRounds': rowsChangedByRounds,
        'pg.replay.timedReplays': 2 * rounds * count,
        'pg.replay.opsPerSec.store': median(sides.replay),
        'pg.replay.opsPerSec.select': median(sides.select),
        'pg.replay.opsPerSec.layer': median(sides.layer),
      },
    };
  } finally {
    await store.close();
    await pool.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
    await pool.end();
  }
}
