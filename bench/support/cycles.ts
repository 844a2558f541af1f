// The request cycles the peer comparison times, built on whichever copy of the package the caller
// loaded: the checkout's dist/ (the peers group) or a packed copy installed elsewhere under another
// Node or another drizzle-orm (the node-versions and drizzle-versions children). Nothing here
// imports the package itself, so a child can load every module from its own installation.
import { randomUUID } from 'node:crypto';
import type { idempotent as idempotentFunction } from '../../src/http/index.js';
import type { LeasedIdempotencyStore } from '../../src/index.js';
import type { openSqliteStore as openSqliteStoreFunction } from '../../src/sqlite/index.js';
import { answerOfSize } from './inputs.js';
import { check, nowMs } from './measure.js';

/** Long enough for every cycle of a run; each benchmark's store is its own and removed after. */
export const TTL_SECONDS = 3600;

/** One full request cycle on `key`: the first request, the work, the answer, the replayed retry. */
export type Cycle = (key: string) => Promise<void>;

/** SQLite's `synchronous` setting of a cycle's store. */
export type Synchronous = 'NORMAL' | 'FULL';

/** The request every cycle sends. */
export const body = {
  amount: 4200,
  currency: 'EUR',
  customer: 'cus_123',
  items: [{ sku: 'a', qty: 2 }],
};

/** The answer every first execution returns (about 1 KB, the same object on every side). */
export const answer = answerOfSize(1024, 1);

/**
 * The "work": nothing, but async, so requests in flight interleave as they do in a server.
 */
export const noop = () => new Promise<void>((resolve) => setImmediate(resolve));

/** Checks that a replay answered {@link answer}. */
export function expectReplay(replayed: unknown): void {
  check((replayed as { id?: unknown } | null | undefined)?.id === answer.id, 'replay');
}

/**
 * The shipped request path over any store: `idempotent(store).handle()` with its default
 * fingerprint; the first request runs the handler, the retry must be replayed with its bytes.
 */
export function layerCycleWith(
  idempotent: typeof idempotentFunction,
  store: LeasedIdempotencyStore<unknown> & { close(): void | Promise<void> },
) {
  const layer = idempotent(store, { ttlSeconds: TTL_SECONDS });
  const handler = async () => {
    await noop();
    return { status: 201, body: answer };
  };
  const request = (key: string) => ({
    method: 'POST',
    path: '/charges',
    headers: { 'idempotency-key': `"${key}"` },
    body,
  });
  // The layer answers with the bytes to send, as a server writes them: compared, not parsed.
  const answerBytes = Buffer.from(JSON.stringify(answer));
  const cycle: Cycle = async (key) => {
    check((await layer.handle(request(key), handler)).outcome === 'executed', 'first request');
    const retry = await layer.handle(request(key), handler);
    const replayed = retry.response.body;
    check(
      retry.outcome === 'replayed' &&
        replayed instanceof Uint8Array &&
        answerBytes.equals(replayed),
      'retry replayed with the first answer',
    );
  };
  return { cycle, close: () => store.close() };
}

/**
 * The least any durable SQLite cycle does, written straight on better-sqlite3 with the store's file
 * and pragmas: one autocommit insert, the work, one autocommit update of the answer, one read of
 * it. No fingerprint, no lookup, no argument checks: the physical limit of this design.
 */
export function bareSqliteCycleWith(
  openSqliteStore: typeof openSqliteStoreFunction,
  path: string,
  synchronous: Synchronous,
) {
  const store = openSqliteStore(path, { synchronous });
  const db = store.db.$client;
  const insert = db.prepare(
    "INSERT INTO keys (id, fingerprint, status, expires) VALUES (?, 'd', 'pending', ?) ON CONFLICT DO NOTHING",
  );
  const update = db.prepare(
    "UPDATE keys SET status = 'done', response = ? WHERE id = ? AND fingerprint = 'd' AND status = 'pending'",
  );
  const select = db.prepare('SELECT response FROM keys WHERE id = ?').pluck();
  const cycle: Cycle = async (key) => {
    check(insert.run(key, Date.now() / 1000 + TTL_SECONDS).changes === 1, 'bare insert');
    await noop();
    check(update.run(JSON.stringify(answer), key).changes === 1, 'bare update');
    expectReplay(JSON.parse(select.get(key) as string));
  };
  return { cycle, close: () => store.close() };
}

/** Full cycles per second with `inFlight` requests running at once, each on a fresh UUID key. */
export async function cyclesPerSecond(cycle: Cycle, count: number, inFlight: number) {
  const keys = Array.from({ length: count }, () => randomUUID());
  let next = 0;
  const worker = async () => {
    while (next < count) await cycle(keys[next++] as string);
  };
  const start = nowMs();
  await Promise.all(Array.from({ length: inFlight }, worker));
  return count / ((nowMs() - start) / 1000);
}

/**
 * Calls per second of `count` pairs of calls of `call`: a first call with a new key (claim, run,
 * record) and its replay (read the recorded result), each checked to answer `expected`.
 */
export async function pairsPerSecond(
  count: number,
  expected: string,
  call: (key: string) => Promise<string>,
  prefix: string,
): Promise<number> {
  const start = nowMs();
  for (let index = 0; index < count; index++) {
    const key = `${prefix}-${index}`;
    check((await call(key)) === expected, 'first call answers its result');
    check((await call(key)) === expected, 'replay answers the recorded result');
  }
  return count / ((nowMs() - start) / 1000);
}
