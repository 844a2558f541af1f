// Child process: one timed round of one measurement on the copy of the package installed in
// argv[2] (see bench/support/installs.ts), loaded from there by path, so its drizzle-orm and its
// better-sqlite3 (built for the Node running this child) are that copy's. argv[3] names the
// measurement, argv[4] is a directory for its database files, argv[5] the calls to time, argv[6]
// the round (which side goes first). Prints one line of JSON: each side's calls per second.
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import type * as FunctionModule from '../../src/function/index.js';
import type * as HttpModule from '../../src/http/index.js';
import type * as SqliteModule from '../../src/sqlite/index.js';
import {
  bareSqliteCycleWith,
  cyclesPerSecond,
  layerCycleWith,
  pairsPerSecond,
} from '../support/cycles.js';
import { check, nowMs } from '../support/measure.js';

const [installed, measurement, dir, countArg, roundArg] = process.argv.slice(2);
if (
  installed === undefined ||
  measurement === undefined ||
  dir === undefined ||
  countArg === undefined ||
  roundArg === undefined
) {
  throw new Error('usage: installed-cycles.ts INSTALLED MEASUREMENT DIR COUNT ROUND');
}
const count = Number(countArg);
const round = Number(roundArg);

async function load<M>(entry: string): Promise<M> {
  const path = join(installed as string, 'node_modules/drizzle-idempotency/dist', `${entry}.js`);
  return (await import(pathToFileURL(path).href)) as M;
}

const { idempotent } = await load<typeof HttpModule>('http/index');
const { openSqliteStore, SqliteGroupCommitStore } = await load<typeof SqliteModule>('sqlite/index');
const { makeIdempotent } = await load<typeof FunctionModule>('function/index');

let files = 0;
function file(): string {
  files += 1;
  return join(dir as string, `${process.pid}-${files}.db`);
}

/** Runs both sides once untimed (JIT, caches), then once timed, in this round's order. */
async function sides(
  first: [string, (prefix: string) => Promise<number>],
  second: [string, (prefix: string) => Promise<number>],
): Promise<Record<string, number>> {
  const order = round % 2 === 0 ? [first, second] : [second, first];
  for (const [name, run] of order) await run(`warm-${name}`);
  const result: Record<string, number> = {};
  for (const [name, run] of order) result[name] = await run(`timed-${name}`);
  return result;
}

/** `peer.cycle1.vsBare`'s two sides: the shipped request path and the bare SQLite cycle. */
async function cycle1() {
  const ours = layerCycleWith(
    idempotent,
    new SqliteGroupCommitStore(openSqliteStore(file(), { synchronous: 'NORMAL' })),
  );
  const bare = bareSqliteCycleWith(openSqliteStore, file(), 'NORMAL');
  try {
    return await sides(
      ['ours', () => cyclesPerSecond(ours.cycle, count, 1)],
      ['bare', () => cyclesPerSecond(bare.cycle, count, 1)],
    );
  } finally {
    await ours.close();
    bare.close();
  }
}

// A fixed keyring: the figures do not depend on the key's bytes.
const KEYRING = { keys: { k1: new Uint8Array(32).fill(7) }, current: 'k1' };

/** `sqlite.seal1k.vsPlain`'s two sides: a 1 KB answer sealed and opened, and stored plain. */
async function seal1k() {
  const text = randomBytes(768).toString('base64');
  const sealedStore = openSqliteStore(file(), { encryption: KEYRING });
  const plainStore = openSqliteStore(file());
  try {
    const sealed = makeIdempotent(async (_key: string) => text, {
      store: sealedStore,
      key: (key) => key,
    });
    const plain = makeIdempotent(async (_key: string) => text, {
      store: plainStore,
      key: (key) => key,
    });
    return await sides(
      ['sealed', (prefix) => pairsPerSecond(count, text, sealed, prefix)],
      ['plain', (prefix) => pairsPerSecond(count, text, plain, prefix)],
    );
  } finally {
    sealedStore.close();
    plainStore.close();
  }
}

/**
 * The store's own operations, one at a time on one file: acquire then finish a new key (the
 * writes of a first request) and fetch a finished key (a replay's read), each checked.
 */
async function storeOps() {
  const store = openSqliteStore(file());
  const response = { id: 'answer', text: randomBytes(768).toString('base64') };
  const now = Date.now() / 1000;
  const acquireFinish = async (prefix: string) => {
    const start = nowMs();
    for (let index = 0; index < count; index++) {
      const key = `${prefix}-${index}`;
      const lease = await store.acquire(key, 'f', { now, expires: now + 3600, leaseSeconds: 60 });
      if (lease.status !== 'acquired') throw new Error('benchmark side did nothing: acquire');
      check(await store.finish(key, 'f', response, lease.fencingToken), 'finish the acquired key');
    }
    return count / ((nowMs() - start) / 1000);
  };
  const fetch = async (prefix: string) => {
    // The keys the acquire side finished in this round's matching pass.
    const source = prefix.replace('fetch', 'acquireFinish');
    const start = nowMs();
    for (let index = 0; index < count; index++) {
      const found = (await store.fetch(`${source}-${index}`, now)) as typeof response | null;
      check(found?.id === response.id, 'fetch a finished key');
    }
    return count / ((nowMs() - start) / 1000);
  };
  try {
    // Fetch reads what acquire-finish wrote, so here acquire-finish always goes first.
    await acquireFinish('warm-acquireFinish');
    await fetch('warm-fetch');
    return {
      acquireFinish: await acquireFinish('timed-acquireFinish'),
      fetch: await fetch('timed-fetch'),
    };
  } finally {
    store.close();
  }
}

const measurements: Record<string, () => Promise<Record<string, number>>> = {
  cycle1,
  seal1k,
  storeOps,
};
const run = measurements[measurement];
if (run === undefined) throw new Error(`unknown measurement ${measurement}`);
process.stdout.write(`${JSON.stringify(await run())}\n`);
