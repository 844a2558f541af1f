import { randomBytes } from 'node:crypto';
import { pairsPerSecond } from './support/cycles.js';
import { alternate, check, median, pairedRatio } from './support/measure.js';
import type { BenchSize, GroupResult } from './support/report.js';
import { shippedFunction, shippedSqlite } from './support/shipped.js';
import { benchDir, freshStoreFile } from './support/sqlite-files.js';

const { makeIdempotent } = shippedFunction;
const { openSqliteStore, sqliteSteps } = shippedSqlite;

// A fixed keyring: the figures do not depend on the key's bytes.
const KEYRING = { keys: { k1: new Uint8Array(32).fill(7) }, current: 'k1' };
const STEP_SECRET = 'a bench secret of at least sixteen bytes';

/**
 * The cost of sealing against plain storage, on SQLite through `makeIdempotent`: the same
 * handler answering `bytes` of text, on a store with `encryption` and on one without. Each pair
 * seals (or writes) one answer and opens (or reads) it once. Ratio = sealed ÷ plain pairs/s.
 */
async function sealingRatio(dir: string, bytes: number, count: number, rounds: number) {
  // Random text, so nothing about the answer is cheaper to process than a real one.
  const answer = randomBytes(Math.ceil((bytes * 3) / 4))
    .toString('base64')
    .slice(0, bytes);
  const sealedStore = openSqliteStore(freshStoreFile(dir), { encryption: KEYRING });
  const plainStore = openSqliteStore(freshStoreFile(dir));
  try {
    const sealed = makeIdempotent(async (_key: string) => answer, {
      store: sealedStore,
      key: (key) => key,
    });
    const plain = makeIdempotent(async (_key: string) => answer, {
      store: plainStore,
      key: (key) => key,
    });
    const sides = await alternate(
      rounds,
      (round) => pairsPerSecond(count, answer, sealed, `s-${round}`),
      (round) => pairsPerSecond(count, answer, plain, `p-${round}`),
    );
    const raw = sealedStore.db.$client
      .prepare('SELECT response FROM keys WHERE response IS NOT NULL LIMIT 1')
      .pluck()
      .get() as string;
    check(!raw.includes(answer), 'the sealed store keeps no plaintext answer');
    return sides;
  } finally {
    sealedStore.close();
    plainStore.close();
  }
}

/**
 * The cost of one step record, on SQLite through `makeIdempotent`: a handler whose one effect
 * runs as `step('effect', …)` against the same handler without steps. Ratio = stepped ÷ plain.
 */
async function stepRatio(dir: string, count: number, rounds: number) {
  const steppedStore = openSqliteStore(freshStoreFile(dir));
  const plainStore = openSqliteStore(freshStoreFile(dir));
  try {
    const stepped = makeIdempotent(async (step, _key: string) => step('effect', () => 'done'), {
      steps: sqliteSteps(steppedStore, { secret: STEP_SECRET }),
      key: (key) => key,
    });
    const plain = makeIdempotent(async (_key: string) => 'done', {
      store: plainStore,
      key: (key) => key,
    });
    const sides = await alternate(
      rounds,
      (round) => pairsPerSecond(count, 'done', stepped, `t-${round}`),
      (round) => pairsPerSecond(count, 'done', plain, `p-${round}`),
    );
    const recorded = steppedStore.db.$client
      .prepare('SELECT count(*) FROM keys WHERE steps IS NOT NULL')
      .pluck()
      .get() as number;
    check(recorded === rounds * count, 'one step record per stepped key');
    return sides;
  } finally {
    steppedStore.close();
    plainStore.close();
  }
}

/**
 * What the stored-answer and step features cost per call against the same call without them,
 * on one SQLite file: sealing and opening a 1 KB and a 64 KB answer (AES-256-GCM) against plain
 * storage, and a handler that records one step against one without steps. Reported, no targets.
 */
export async function featureCosts({ quick }: BenchSize): Promise<GroupResult> {
  const { dir, cleanup } = benchDir();
  const rounds = quick ? 6 : 20;
  try {
    const seal1k = await sealingRatio(dir, 1024, 300, rounds);
    const seal64k = await sealingRatio(dir, 64 * 1024, 100, rounds);
    const step = await stepRatio(dir, 300, rounds);
    return {
      metrics: {
        'sqlite.seal1k.vsPlain': pairedRatio(seal1k),
        'sqlite.seal64k.vsPlain': pairedRatio(seal64k),
        'sqlite.step.vsNoSteps': pairedRatio(step),
      },
      details: {
        'sqlite.seal1k.sealedPairsPerSec': median(seal1k.ours),
        'sqlite.seal1k.plainPairsPerSec': median(seal1k.theirs),
        'sqlite.seal64k.sealedPairsPerSec': median(seal64k.ours),
        'sqlite.seal64k.plainPairsPerSec': median(seal64k.theirs),
        'sqlite.step.steppedPairsPerSec': median(step.ours),
        'sqlite.step.plainPairsPerSec': median(step.theirs),
      },
    };
  } finally {
    cleanup();
  }
}
