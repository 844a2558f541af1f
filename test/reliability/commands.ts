// Commands of the model-based test: each runs one operation on the real store and on the
// reference model, compares the results, then compares the whole table with the model.
// Async throughout, so the same commands drive the synchronous SQLite store and async stores.
import fc from 'fast-check';
import { expect } from 'vitest';
import type { TransactionRunner } from '../../src/core/transaction-runner.js';
import {
  InvalidFingerprintError,
  InvalidKeyError,
  InvalidLimitError,
  InvalidOptionError,
  InvalidTimeError,
  type LeasedIdempotencyStore,
  UnserializableResponseError,
} from '../../src/index.js';
import { sweep } from '../../src/sweep.js';
import type { RawRow } from '../contract/harness.js';
import { byteOrder, type ReferenceModel } from './model.js';

/** What the commands run against: a store and a direct view of its table. */
export interface ModelTarget {
  store: LeasedIdempotencyStore;
  /** Every row of the table, read without the store. */
  rows(): Promise<RawRow[]>;
  /** Empties the table, so one store serves every sequence. */
  clear(): Promise<void>;
}

/** A target whose store also has a transactional runner, driven by the transactional commands. */
export interface TransactionalModelTarget extends ModelTarget {
  // biome-ignore lint/suspicious/noExplicitAny: the handler here never touches the transaction
  transaction: TransactionRunner<any>;
}

/** The model side of a run (fast-check wants an object). */
export interface ModelState {
  ref: ReferenceModel;
}

class StoreCommand implements fc.AsyncCommand<ModelState, ModelTarget> {
  constructor(
    private readonly label: string,
    private readonly body: (ref: ReferenceModel, store: LeasedIdempotencyStore) => Promise<void>,
  ) {}

  check(): boolean {
    return true;
  }

  async run(model: ModelState, target: ModelTarget): Promise<void> {
    await this.body(model.ref, target.store);
    const actual = (await target.rows()).sort((a, b) => byteOrder(a.id, b.id));
    expect(actual, `table after ${this.label}`).toEqual(model.ref.table());
  }

  toString(): string {
    return this.label;
  }
}

const show = (value: unknown): string =>
  typeof value === 'bigint' ? `${value}n` : (JSON.stringify(value) ?? String(value));

// A small pool so sequences collide on keys; the non-ASCII ones tell UTF-8 byte order
// ('\uFFFD' < '😀') from UTF-16 order ('😀' < '\uFFFD').
const KEYS = ['a', 'b', 'B', 'a b', 'é', '\uFFFD', '😀', `long-${'k'.repeat(300)}`];
// Mostly three keys, so a sequence often walks one key through several states.
const key = fc.oneof(
  { arbitrary: fc.constantFrom('a', '\uFFFD', '😀'), weight: 4 },
  { arbitrary: fc.constantFrom(...KEYS), weight: 1 },
);
const fingerprint = fc.constantFrom('d1', 'd2');
// Few distinct times, so `now == expires` is common.
const time = fc.constantFrom(-1, 0, 1, 2, 2.5, 3, 1e9);
const limit = fc.oneof(fc.integer({ min: 1, max: 4 }), fc.constantFrom(100, undefined));
const batchSize = fc.oneof(fc.integer({ min: 1, max: 4 }), fc.constant(10_000));
const response = fc.jsonValue({ maxDepth: 2 });
// A fencing token, picked when the command runs among those the key was given (see tokenOf).
const fencingToken = fc.nat({ max: 4 });

/**
 * The token a fenced write carries: most often the key's newest, else an older one (a stale
 * owner's, taken over or released since), or 1 (what `reserve` rows carry, never handed out).
 */
function tokenOf(ref: ReferenceModel, key: string, pick: number): number {
  const pool = [1, ...ref.tokens(key)];
  return pool[pool.length - 1 - (pick % pool.length)] ?? 1;
}

/** `acquire` on the store and on the model; the store's token must keep the fencing rule. */
async function acquireBoth(
  ref: ReferenceModel,
  store: LeasedIdempotencyStore,
  call: { key: string; fingerprint: string; expires: number; now: number; lease: number },
) {
  const { key: k, fingerprint: d, expires: e, now, lease } = call;
  const actual = await store.acquire(k, d, { expires: e, now, leaseSeconds: lease });
  const token = actual.status === 'acquired' ? actual.fencingToken : undefined;
  if (token !== undefined) expect(ref.tokenRule(k, token), 'the fencing rule').toBeUndefined();
  const expected = ref.acquire(k, d, e, now, lease, token);
  if (expected.status === 'done' || expected.status === 'mismatch') {
    const { response, ...rest } = expected.record;
    expect(actual).toMatchObject({ status: expected.status, record: rest });
  } else expect(actual).toEqual(expected);
  return actual;
}
const leaseSeconds = fc.constantFrom(0.5, 1, 2);

const BAD_KEYS: unknown[] = ['', 'a\u0000b', '\uD800', 42, null, undefined];
const BAD_TIMES: unknown[] = [Number.NaN, Number.POSITIVE_INFINITY, '1', null, 1n];
const BAD_LIMITS: unknown[] = [0, 101, 1.5, true, Number.NaN, '5', null];
const BAD_BATCH_SIZES: unknown[] = [0, 10_001, 2.5, false, '10'];
const BAD_RESPONSES: [string, () => unknown][] = [
  ['undefined', () => undefined],
  ['{ x: undefined }', () => ({ x: undefined })],
  ['{ total: NaN }', () => ({ total: Number.NaN })],
  ['[1, <hole>, 3]', () => Object.assign(new Array(3), { 0: 1, 2: 3 })],
  ['10n', () => 10n],
  ['new Map()', () => new Map([['a', 1]])],
];

const BAD_SWEEP_OPTIONS: [string, unknown, new (...args: never[]) => Error][] = [
  ['{ now: NaN }', { now: Number.NaN }, InvalidTimeError],
  ['{}', {}, InvalidTimeError],
  ['{ now: 1, batchSize: 0 }', { now: 1, batchSize: 0 }, InvalidOptionError],
  ['{ now: 1, batchSize: 10001 }', { now: 1, batchSize: 10_001 }, InvalidOptionError],
  ['{ now: 1, maxBatches: 0 }', { now: 1, maxBatches: 0 }, InvalidOptionError],
  ['{ now: 1, maxSeconds: 0 }', { now: 1, maxSeconds: 0 }, InvalidOptionError],
  ["{ now: 1, dryRun: 'yes' }", { now: 1, dryRun: 'yes' }, InvalidOptionError],
  ['null', null, InvalidOptionError],
];

// Calls with a wrong-typed argument go through `unknown` on purpose: they are the hostile input.
type Loose = Record<string, (...args: unknown[]) => unknown>;
const loose = (store: LeasedIdempotencyStore): Loose => store as unknown as Loose;

async function refused(call: () => unknown, error: new (...args: never[]) => Error) {
  await expect(Promise.resolve().then(call)).rejects.toBeInstanceOf(error);
}

// Weighted so that keys often reach `done` before being fetched, expired and purged.
const good: fc.WeightedArbitrary<StoreCommand>[] = [
  {
    weight: 4,
    arbitrary: fc.tuple(key, fingerprint, time).map(
      ([k, d, e]) =>
        new StoreCommand(`reserve(${show(k)}, ${d}, ${e})`, async (ref, store) => {
          expect(await store.reserve(k, d, e)).toBe(ref.reserve(k, d, e));
        }),
    ),
  },
  {
    weight: 4,
    arbitrary: fc.tuple(key, fingerprint, response).map(
      ([k, d, r]) =>
        new StoreCommand(`finish(${show(k)}, ${d}, ${show(r)})`, async (ref, store) => {
          expect(await store.finish(k, d, r)).toBe(ref.finish(k, d, JSON.stringify(r)));
        }),
    ),
  },
  {
    weight: 2,
    arbitrary: fc.tuple(key, time).map(
      ([k, now]) =>
        new StoreCommand(`fetch(${show(k)}, ${now})`, async (ref, store) => {
          const answer = await store.fetch(k, now);
          const expected = ref.fetch(k, now);
          expect(expected === null ? answer : JSON.stringify(answer)).toBe(expected);
        }),
    ),
  },
  {
    weight: 2,
    arbitrary: fc.tuple(time, limit).map(
      ([now, n]) =>
        new StoreCommand(`expired(${now}, ${n})`, async (ref, store) => {
          expect(await store.expired(now, n)).toEqual(ref.expired(now, n ?? 10));
        }),
    ),
  },
  {
    weight: 2,
    arbitrary: fc.tuple(time, limit).map(
      ([now, n]) =>
        new StoreCommand(`purge(${now}, ${n})`, async (ref, store) => {
          expect(await store.purge(now, n)).toEqual(ref.purge(now, n ?? 10));
        }),
    ),
  },
  {
    weight: 2,
    arbitrary: fc.tuple(time, batchSize).map(
      ([now, n]) =>
        new StoreCommand(`sweepBatch(${now}, ${n})`, async (ref, store) => {
          expect(await store.sweepBatch(now, n)).toBe(ref.sweepBatch(now, n));
        }),
    ),
  },
  {
    weight: 1,
    arbitrary: fc
      .tuple(time, batchSize, fc.option(fc.integer({ min: 1, max: 3 })), fc.boolean())
      .map(([now, n, max, dryRun]) => {
        const maxBatches = max ?? undefined;
        const label = `sweep({ now: ${now}, batchSize: ${n}, maxBatches: ${maxBatches}, dryRun: ${dryRun} })`;
        return new StoreCommand(label, async (ref, store) => {
          const result = await sweep(store, { now, batchSize: n, maxBatches, dryRun });
          const { seconds, ...rest } = result;
          expect(seconds).toBeGreaterThanOrEqual(0);
          expect(rest).toEqual(ref.sweep(now, n, maxBatches, dryRun));
        });
      }),
  },
  {
    weight: 1,
    arbitrary: fc.constant(
      new StoreCommand('counts()', async (ref, store) => {
        expect(await store.counts()).toEqual(ref.counts());
      }),
    ),
  },
  {
    weight: 1,
    arbitrary: time.map(
      (now) =>
        new StoreCommand(`stats(${now})`, async (ref, store) => {
          // The model counts the leases too: lapsed and unrecorded are compared as well.
          expect(await store.stats(now)).toEqual(ref.stats(now));
        }),
    ),
  },
  {
    weight: 1,
    arbitrary: fc.tuple(key, fingerprint).map(
      ([k, d]) =>
        new StoreCommand(`release(${show(k)}, ${d})`, async (ref, store) => {
          expect(await store.release(k, d)).toBe(ref.release(k, d));
        }),
    ),
  },
  {
    weight: 2,
    arbitrary: key.map(
      (k) =>
        new StoreCommand(`get(${show(k)})`, async (ref, store) => {
          const record = await store.get(k);
          const expected = ref.get(k);
          if (expected === null) expect(record).toBeNull();
          else {
            const { response, ...rest } = expected;
            expect(record).toMatchObject(rest);
            // A stored JSON `null` comes back as null too, so done rows compare as JSON text.
            const shown = rest.status === 'done' ? JSON.stringify(record?.response) : null;
            expect(shown).toBe(response);
            expect(record?.response ?? null).toEqual(
              response === null ? null : JSON.parse(response),
            );
          }
        }),
    ),
  },
];

// The fenced leases: acquire and takeover, renew, fenced finish and release, unrecorded rows and
// the operator's tools, on the same keys and times as the rest, so they interleave with them.
const leases: fc.WeightedArbitrary<StoreCommand>[] = [
  {
    weight: 4,
    arbitrary: fc.tuple(key, fingerprint, time, time, leaseSeconds).map(
      ([k, d, e, now, lease]) =>
        new StoreCommand(
          `acquire(${show(k)}, ${d}, { expires: ${e}, now: ${now}, leaseSeconds: ${lease} })`,
          async (ref, store) => {
            await acquireBoth(ref, store, { key: k, fingerprint: d, expires: e, now, lease });
          },
        ),
    ),
  },
  {
    // Release and reclaim (issue 26): the key is released (by an operator, or token-less), claimed
    // again, and every earlier owner of the key then writes with its stale token: all refused.
    weight: 2,
    arbitrary: fc.tuple(key, fingerprint, time, leaseSeconds, fc.boolean(), response).map(
      ([k, d, now, lease, operator, r]) =>
        new StoreCommand(
          `reclaim(${show(k)}, ${d}, now: ${now}, leaseSeconds: ${lease}, ${operator ? 'releasePending' : 'release'}) then stale writes`,
          async (ref, store) => {
            if (operator) expect(await store.releasePending(k)).toBe(ref.releasePending(k));
            else expect(await store.release(k, d)).toBe(ref.release(k, d));
            const claimed = await acquireBoth(ref, store, {
              key: k,
              fingerprint: d,
              expires: 1e9,
              now,
              lease,
            });
            const current = claimed.status === 'acquired' ? claimed.fencingToken : undefined;
            for (const stale of ref.tokens(k).filter((token) => token !== current)) {
              const refusedWrites = [
                [await store.renew(k, d, stale, 1e9), ref.renew(k, d, stale, 1e9)],
                [await store.markUnrecorded(k, d, stale), ref.markUnrecorded(k, d, stale)],
                [await store.finish(k, d, r, stale), ref.finish(k, d, JSON.stringify(r), stale)],
                [await store.release(k, d, stale), ref.release(k, d, stale)],
              ];
              for (const [actual, expected] of refusedWrites) {
                expect(actual, `a stale owner's write with token ${stale}`).toBe(expected);
                if (current !== undefined) expect(actual).toBe(false);
              }
            }
          },
        ),
    ),
  },
  {
    weight: 2,
    arbitrary: fc.tuple(key, fingerprint, fencingToken, time).map(
      ([k, d, pick, until]) =>
        new StoreCommand(`renew(${show(k)}, ${d}, token#${pick}, ${until})`, async (ref, store) => {
          const a = tokenOf(ref, k, pick);
          expect(await store.renew(k, d, a, until)).toBe(ref.renew(k, d, a, until));
        }),
    ),
  },
  {
    weight: 3,
    arbitrary: fc.tuple(key, fingerprint, response, fencingToken).map(
      ([k, d, r, pick]) =>
        new StoreCommand(
          `finish(${show(k)}, ${d}, ${show(r)}, token#${pick})`,
          async (ref, store) => {
            const a = tokenOf(ref, k, pick);
            expect(await store.finish(k, d, r, a)).toBe(ref.finish(k, d, JSON.stringify(r), a));
          },
        ),
    ),
  },
  {
    weight: 1,
    arbitrary: fc.tuple(key, fingerprint, fencingToken).map(
      ([k, d, pick]) =>
        new StoreCommand(`release(${show(k)}, ${d}, token#${pick})`, async (ref, store) => {
          const a = tokenOf(ref, k, pick);
          expect(await store.release(k, d, a)).toBe(ref.release(k, d, a));
        }),
    ),
  },
  {
    weight: 1,
    arbitrary: fc.tuple(key, fingerprint, fencingToken).map(
      ([k, d, pick]) =>
        new StoreCommand(`markUnrecorded(${show(k)}, ${d}, token#${pick})`, async (ref, store) => {
          const a = tokenOf(ref, k, pick);
          expect(await store.markUnrecorded(k, d, a)).toBe(ref.markUnrecorded(k, d, a));
        }),
    ),
  },
  {
    weight: 1,
    arbitrary: fc.tuple(key, fc.option(fingerprint, { nil: undefined })).map(
      ([k, f]) =>
        new StoreCommand(`releasePending(${show(k)}, ${f})`, async (ref, store) => {
          expect(await store.releasePending(k, f)).toBe(ref.releasePending(k, f));
        }),
    ),
  },
  {
    weight: 1,
    arbitrary: fc.tuple(time, fc.boolean(), fc.integer({ min: 1, max: 4 })).map(
      ([now, stale, n]) =>
        new StoreCommand(
          `pendingKeys({ now: ${now}, stale: ${stale}, limit: ${n} })`,
          async (ref, store) => {
            expect(await store.pendingKeys({ now, stale, limit: n })).toEqual(
              ref.pendingKeys(now, stale, n),
            );
          },
        ),
    ),
  },
];

// Bad input of every kind: the typed error, and (checked by StoreCommand) an unchanged table.
const bad = fc.oneof(
  fc
    .tuple(fc.constantFrom(...BAD_KEYS), fingerprint, time)
    .map(
      ([k, d, e]) =>
        new StoreCommand(`reserve(${show(k)}, ${d}, ${e}) refused`, (_, store) =>
          refused(() => loose(store).reserve?.(k, d, e), InvalidKeyError),
        ),
    ),
  fc
    .tuple(key, fc.constantFrom(...BAD_KEYS), time)
    .map(
      ([k, d, e]) =>
        new StoreCommand(`reserve(${show(k)}, ${show(d)}, ${e}) refused`, (_, store) =>
          refused(() => loose(store).reserve?.(k, d, e), InvalidFingerprintError),
        ),
    ),
  fc
    .tuple(key, fingerprint, fc.constantFrom(...BAD_TIMES))
    .map(
      ([k, d, e]) =>
        new StoreCommand(`reserve(${show(k)}, ${d}, ${show(e)}) refused`, (_, store) =>
          refused(() => loose(store).reserve?.(k, d, e), InvalidTimeError),
        ),
    ),
  fc
    .tuple(key, fingerprint, fc.constantFrom(...BAD_RESPONSES))
    .map(
      ([k, d, [label, make]]) =>
        new StoreCommand(`finish(${show(k)}, ${d}, ${label}) refused`, (_, store) =>
          refused(() => store.finish(k, d, make()), UnserializableResponseError),
        ),
    ),
  fc
    .tuple(fc.constantFrom(...BAD_TIMES), key)
    .map(
      ([now, k]) =>
        new StoreCommand(`fetch(${show(k)}, ${show(now)}) refused`, (_, store) =>
          refused(() => loose(store).fetch?.(k, now), InvalidTimeError),
        ),
    ),
  fc
    .tuple(fc.constantFrom('expired', 'purge'), time, fc.constantFrom(...BAD_LIMITS))
    .map(
      ([op, now, n]) =>
        new StoreCommand(`${op}(${now}, ${show(n)}) refused`, (_, store) =>
          refused(() => loose(store)[op]?.(now, n), InvalidLimitError),
        ),
    ),
  fc
    .tuple(fc.constantFrom('expired', 'purge', 'stats'), fc.constantFrom(...BAD_TIMES))
    .map(
      ([op, now]) =>
        new StoreCommand(`${op}(${show(now)}) refused`, (_, store) =>
          refused(() => loose(store)[op]?.(now), InvalidTimeError),
        ),
    ),
  fc
    .tuple(time, fc.constantFrom(...BAD_BATCH_SIZES))
    .map(
      ([now, n]) =>
        new StoreCommand(`sweepBatch(${now}, ${show(n)}) refused`, (_, store) =>
          refused(() => loose(store).sweepBatch?.(now, n), InvalidOptionError),
        ),
    ),
  fc
    .tuple(fc.constantFrom(...BAD_KEYS), fingerprint)
    .map(
      ([k, d]) =>
        new StoreCommand(`release(${show(k)}, ${d}) refused`, (_, store) =>
          refused(() => loose(store).release?.(k, d), InvalidKeyError),
        ),
    ),
  fc
    .constantFrom(...BAD_SWEEP_OPTIONS)
    .map(
      ([label, options, error]) =>
        new StoreCommand(`sweep(${label}) refused`, (_, store) =>
          refused(() => sweep(store, options as never), error),
        ),
    ),
  fc
    .constantFrom(...BAD_KEYS)
    .map(
      (k) =>
        new StoreCommand(`get(${show(k)}) refused`, (_, store) =>
          refused(() => loose(store).get?.(k), InvalidKeyError),
        ),
    ),
);

/** Random sequences of every operation, valid and invalid, over a small pool of keys. */
export const storeCommands = fc.commands(
  [fc.oneof(...good, ...leases, { arbitrary: bad, weight: 1 })],
  {
    maxCommands: 60,
    size: 'large',
  },
);

// The transactional path: a handler that returns (its answer recorded by the runner's fenced
// UPDATE, as `finish` would) or throws (everything rolled back, the table unchanged).
const transactional = fc
  .tuple(key, fingerprint, response, fencingToken, fc.boolean())
  .map(([k, d, r, pick, fail]) => {
    const label = `transaction(${show(k)}, ${d}, token#${pick}, ${fail ? 'throws' : show(r)})`;
    return {
      check: () => true,
      toString: () => label,
      async run(model: ModelState, target: TransactionalModelTarget): Promise<void> {
        const a = tokenOf(model.ref, k, pick);
        const text = JSON.stringify(r);
        const outcome = target.transaction
          .run(
            { key: k, fingerprint: d, fencingToken: a },
            () => {
              if (fail) throw new Error('handler failed');
              return r;
            },
            () => text,
          )
          .then(({ committed }) => committed);
        if (fail) await expect(outcome).rejects.toThrow('handler failed');
        else expect(await outcome).toBe(model.ref.record(k, d, text, a));
        const actual = (await target.rows()).sort((x, y) => byteOrder(x.id, y.id));
        expect(actual, `table after ${label}`).toEqual(model.ref.table());
      },
    } satisfies fc.AsyncCommand<ModelState, TransactionalModelTarget>;
  });

/** The same sequences with the transactional path mixed in. */
export const transactionalCommands = fc.commands(
  [
    fc.oneof(
      ...good,
      ...leases,
      { arbitrary: transactional, weight: 4 },
      { arbitrary: bad, weight: 1 },
    ),
  ],
  {
    maxCommands: 60,
    size: 'large',
  },
);
