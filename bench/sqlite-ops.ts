import { answerOfSize, type JsonObject, realisticKeys } from './support/inputs.js';
import { alternate, check, median, opsPerSecond, pairedRatio } from './support/measure.js';
import type { BenchSize, GroupResult, Metric } from './support/report.js';
import { shippedSqlite } from './support/shipped.js';
import { benchDir, freshStoreFile } from './support/sqlite-files.js';

const { openSqliteStore } = shippedSqlite;

type Answer = JsonObject;
interface Input {
  readonly key: string;
  readonly fingerprint: string;
}

/**
 * reserve, finish and fetch of the store against raw better-sqlite3 prepared statements written by
 * hand for the same table, on the same connection (so the same file and pragmas), on realistic
 * inputs (UUID keys, 64-hex digests, answers of about 1 KB and 4 KB) and on tiny ones. The raw side
 * does what a careful user would: a prepared statement, `JSON.stringify` before writing, `.pluck()`
 * and `JSON.parse` when reading. The store also validates every argument. Both sides check that
 * each write changed one row and each read found its answer.
 */
export async function sqliteOps({ quick }: BenchSize): Promise<GroupResult> {
  const count = 2_000;
  const rounds = quick ? 15 : 41;
  const { dir, cleanup } = benchDir();
  const path = freshStoreFile(dir);
  const store = openSqliteStore<Answer>(path);
  const cached = openSqliteStore<Answer>(path, { answerCacheSize: count });
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
  // Each case writes its own keys; inputs are made before the clock starts.
  const tinyInputs = (side: string, round: number): Input[] =>
    Array.from({ length: count }, (_, i) => ({ key: `${side}-${round}-${i}`, fingerprint: 'd' }));
  const answers = (bytes: number) =>
    Array.from({ length: count }, (_, i) => answerOfSize(bytes, i));

  const reserveBlock = (inputs: readonly Input[]) => ({
    ours: () =>
      opsPerSecond(count, (i) => {
        const { key, fingerprint } = inputs[i] as Input;
        check(store.reserve(key, fingerprint, 1e9), 'reserve');
      }),
    theirs: (rawInputs: readonly Input[]) =>
      opsPerSecond(count, (i) => {
        const { key, fingerprint } = rawInputs[i] as Input;
        check(raw.reserve.run(key, fingerprint, 1e9).changes === 1, 'raw reserve');
      }),
  });

  // One case: reserve (timed when `timeReserve`), finish with `payloads`, fetch, each alternating.
  async function runCase(
    name: string,
    makeInputs: (side: string, round: number) => Input[],
    payloads: readonly Answer[],
    timeReserve: boolean,
  ) {
    const oursInputs: Input[][] = [];
    const rawInputs: Input[][] = [];
    for (let round = 0; round < rounds; round++) {
      oursInputs.push(makeInputs(`${name}-o`, round));
      rawInputs.push(makeInputs(`${name}-r`, round));
    }
    const ourIn = (r: number) => oursInputs[r] as Input[];
    const rawIn = (r: number) => rawInputs[r] as Input[];
    let reserve: { ours: number[]; theirs: number[] } | undefined;
    if (timeReserve) {
      reserve = await alternate(
        rounds,
        (r) => reserveBlock(ourIn(r)).ours(),
        (r) => reserveBlock(ourIn(r)).theirs(rawIn(r)),
      );
    } else {
      for (let r = 0; r < rounds; r++) {
        reserveBlock(ourIn(r)).ours();
        reserveBlock(ourIn(r)).theirs(rawIn(r));
      }
    }
    const finish = await alternate(
      rounds,
      (r) =>
        opsPerSecond(count, (i) => {
          const { key, fingerprint } = ourIn(r)[i] as Input;
          check(store.finish(key, fingerprint, payloads[i] as Answer), 'finish');
        }),
      (r) =>
        opsPerSecond(count, (i) => {
          const { key, fingerprint } = rawIn(r)[i] as Input;
          const text = JSON.stringify(payloads[i]);
          check(raw.finish.run(text, key, fingerprint).changes === 1, 'raw finish');
        }),
    );
    const fetch = await alternate(
      rounds,
      (r) =>
        opsPerSecond(count, (i) => check(store.fetch(ourIn(r)[i]?.key ?? '', 5) !== null, 'fetch')),
      (r) =>
        opsPerSecond(count, (i) =>
          check(rawFetch(rawIn(r)[i]?.key ?? '', 5) !== null, 'raw fetch'),
        ),
    );
    return { reserve, finish, fetch, ourIn, rawIn };
  }

  try {
    const oneKb = answers(1024);
    const realistic = await runCase('k1', () => realisticKeys(count), oneKb, true);
    const fourKb = await runCase('k4', () => realisticKeys(count), answers(4096), false);
    const tinyAnswers = Array.from({ length: count }, (_, i) => ({ receipt: i }));
    const tiny = await runCase('t', tinyInputs, tinyAnswers, true);
    const cachedFetch = await alternate(
      rounds,
      (r) => {
        const inputs = realistic.ourIn(r);
        // The first pass fills the cache; the measured one replays hot keys.
        for (let i = 0; i < count; i++) cached.fetch(inputs[i]?.key ?? '', 5);
        return opsPerSecond(count, (i) =>
          check(cached.fetch(inputs[i]?.key ?? '', 5) !== null, 'cached fetch'),
        );
      },
      (r) =>
        opsPerSecond(count, (i) =>
          check(rawFetch(realistic.rawIn(r)[i]?.key ?? '', 5) !== null, 'raw fetch'),
        ),
    );
    // acquire (a reservation holding a 30 s lease) against reserve, on fresh keys of their own:
    // what a lease costs the first request.
    const acquireKeys = Array.from({ length: rounds }, () => realisticKeys(count));
    const reserveKeys = Array.from({ length: rounds }, () => realisticKeys(count));
    const lease = await alternate(
      rounds,
      (r) =>
        opsPerSecond(count, (i) => {
          const { key, fingerprint } = (acquireKeys[r] as Input[])[i] as Input;
          const acquired = store.acquire(key, fingerprint, {
            expires: 1e9,
            now: 5,
            leaseSeconds: 30,
          });
          check(acquired.status === 'acquired', 'acquire');
        }),
      (r) =>
        opsPerSecond(count, (i) => {
          const { key, fingerprint } = (reserveKeys[r] as Input[])[i] as Input;
          check(store.reserve(key, fingerprint, 1e9), 'reserve');
        }),
    );
    const metrics: Record<string, Metric> = {};
    const details: Record<string, number> = {};
    const record = (name: string, sides: { ours: number[]; theirs: number[] }) => {
      metrics[`sqlite.${name}`] = pairedRatio(sides);
      details[`sqlite.${name}.opsPerSec.store`] = median(sides.ours);
      details[`sqlite.${name}.opsPerSec.raw`] = median(sides.theirs);
    };
    if (realistic.reserve) record('reserve.ratio', realistic.reserve);
    record('finish.ratio', realistic.finish);
    record('fetch.ratio', realistic.fetch);
    record('finish.ratio4k', fourKb.finish);
    record('fetch.ratio4k', fourKb.fetch);
    if (tiny.reserve) record('reserve.tinyRatio', tiny.reserve);
    record('finish.tinyRatio', tiny.finish);
    record('fetch.tinyRatio', tiny.fetch);
    record('fetch.cachedRatio', cachedFetch);
    metrics['sqlite.acquire.vsReserve'] = pairedRatio(lease);
    details['sqlite.acquire.opsPerSec'] = median(lease.ours);
    details['sqlite.acquire.opsPerSec.reserve'] = median(lease.theirs);
    return { metrics, details };
  } finally {
    cached.close();
    store.close();
    cleanup();
  }
}
