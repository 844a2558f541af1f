// The step rules, written once and run on every dialect with a step log: each dialect's file
// opens its store and its ledger table and calls stepsSuite.
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import {
  makeIdempotent,
  resumeAbandoned,
  type Step,
  type StepLog,
  type StepLogOptions,
} from '../../src/function/index.js';
import { storedId } from '../../src/http/scope.js';
import {
  EncryptionKeyMissingError,
  IdempotencyError,
  InvalidOptionError,
  type Keyring,
  type LeasedIdempotencyStore,
  StepNotStorableError,
  StepSupersededError,
} from '../../src/index.js';

/** What `rekey` answers, as far as the suite reads it. */
interface Rekeyed {
  readonly resealed: number;
  readonly unreadable: string[];
}

/** One store with a ledger table of its own, on one dialect. */
export interface StepsHarness<TX> {
  readonly store: LeasedIdempotencyStore<unknown>;
  /** The dialect's step log on `store`. */
  steps(options: StepLogOptions): StepLog<TX>;
  /** Writes a ledger row for `id` in `tx`; synchronous on SQLite. */
  ledger(tx: TX, id: string): unknown;
  /** The ledger rows of `id`, read outside any transaction. */
  ledgerRows(id: string): Promise<number>;
  /** The `steps` column of `key`'s row. */
  stepsColumn(key: string): Promise<string | null>;
  /**
   * Another store over the same database, sealing with `keyring` (or storing JSON text without
   * one), and its step log; closed by {@link close}.
   */
  reopen(keyring?: Keyring): Promise<{
    readonly store: LeasedIdempotencyStore<unknown> & {
      rekey(): Rekeyed | Promise<Rekeyed>;
    };
    steps(options: StepLogOptions): StepLog<TX>;
  }>;
  close(): Promise<void>;
}

const SECRET = 'a secret of at least 16 bytes';
const OLD_KEY = new Uint8Array(32).fill(7);
const NEW_KEY = new Uint8Array(32).fill(9);

// `value` once `written` is done: at once for SQLite's synchronous writes, a promise otherwise, so
// a synchronous transactional step stays synchronous.
// Drizzle's queries are thenables that run only once awaited, not promises.
function settled<T>(written: unknown, value: T): T | Promise<T> {
  if (isThenable(written)) return Promise.resolve(written).then(() => value);
  return value;
}

function isThenable(value: unknown): value is PromiseLike<unknown> {
  return (
    typeof value === 'object' &&
    value !== null &&
    typeof (value as { then?: unknown }).then === 'function'
  );
}

export function stepsSuite<TX>(name: string, open: () => Promise<StepsHarness<TX>>): void {
  describe(`steps on ${name}`, () => {
    let harness: StepsHarness<TX>;
    let clock = 1000;
    const now = () => clock;
    beforeEach(async () => {
      harness = await open();
      clock = 1000;
    });
    afterEach(async () => {
      await harness.close();
    });

    // A three-step payment whose `fail` makes it throw after the step named there.
    function payment(calls: Record<string, number>, fail: { after?: string }) {
      const log = harness.steps({ secret: SECRET });
      const count = (step: string) => {
        calls[step] = (calls[step] ?? 0) + 1;
      };
      return makeIdempotent(
        async (step: Step<TX>, order: { id: string; cents: number }) => {
          const charge = await step('charge', ({ key }) => {
            count('charge');
            return { id: `ch_${key.slice(0, 10)}`, at: new Date(5000), cents: BigInt(order.cents) };
          });
          if (fail.after === 'charge') throw new Error('crash after charge');
          await step.tx('ledger', (tx) => {
            count('ledger');
            return settled(harness.ledger(tx, order.id), 'ledgered');
          });
          if (fail.after === 'ledger') throw new Error('crash after ledger');
          const receipt = await step('receipt', () => {
            count('receipt');
            return `r-${order.id}`;
          });
          return { charge: charge.id, at: charge.at, cents: charge.cents, receipt };
        },
        { steps: log, key: (order) => `pay:${order.id}`, now, leaseSeconds: 30 },
      );
    }

    it('a retry after a failure goes on from the last recorded step, never running one twice', async () => {
      const calls: Record<string, number> = {};
      const fail: { after?: string } = { after: 'charge' };
      const pay = payment(calls, fail);
      await expect(pay({ id: 'o1', cents: 500 })).rejects.toThrow('crash after charge');
      // The key kept its recorded step, its lease ended at once: a retry takes it over.
      expect(await harness.store.get('pay:o1')).toMatchObject({ status: 'pending' });
      fail.after = 'ledger';
      await expect(pay({ id: 'o1', cents: 500 })).rejects.toThrow('crash after ledger');
      fail.after = undefined;
      const answer = await pay({ id: 'o1', cents: 500 });
      expect(answer).toEqual({
        charge: expect.stringMatching(/^ch_/),
        at: new Date(5000),
        cents: 500n,
        receipt: 'r-o1',
      });
      expect(calls).toEqual({ charge: 1, ledger: 1, receipt: 1 });
      expect(await harness.ledgerRows('o1')).toBe(1);
      // Done: a replay returns the same answer and runs nothing.
      expect(await pay({ id: 'o1', cents: 500 })).toEqual(answer);
      expect(calls).toEqual({ charge: 1, ledger: 1, receipt: 1 });
    });

    it('an owner whose key was taken over cannot record a step, and its transactional step commits nothing', async () => {
      const log = harness.steps({ secret: SECRET });
      let release: () => void = () => undefined;
      const paused = new Promise<void>((resolve) => {
        release = resolve;
      });
      let reachedPause: () => void = () => undefined;
      const atPause = new Promise<void>((resolve) => {
        reachedPause = resolve;
      });
      const runs: string[] = [];
      const pay = makeIdempotent(
        async (step: Step<TX>, id: string, who: string) => {
          await step('charge', () => {
            runs.push(`charge:${who}`);
            return who;
          });
          if (who === 'old') {
            reachedPause();
            await paused;
          }
          await step.tx('ledger', (tx) => {
            runs.push(`ledger:${who}`);
            return settled(harness.ledger(tx, id), who);
          });
          return who;
        },
        { steps: log, key: (id) => id, payload: (id) => id, now, leaseSeconds: 30 },
      );
      const old = pay('k1', 'old');
      await atPause;
      // The old owner froze past its lease; the heartbeat renews on the wall clock, so move the
      // caller's clock past any renewal instead.
      clock += 10_000;
      expect(await pay('k1', 'new')).toBe('new');
      release();
      await expect(old).rejects.toBeInstanceOf(StepSupersededError);
      // The new owner got the old owner's charge without running it, and only one ledger row exists.
      expect(runs).toEqual(['charge:old', 'ledger:new', 'ledger:old']);
      expect(await harness.ledgerRows('k1')).toBe(1);
      expect(await pay('k1', 'new')).toBe('new');
    });

    it('the completer drives a lapsed key to its answer with the recorded arguments, and the retry replays it', async () => {
      const calls: Record<string, number> = {};
      const fail: { after?: string } = { after: 'ledger' };
      const log = harness.steps({ secret: SECRET });
      const count = (name: string) => {
        calls[name] = (calls[name] ?? 0) + 1;
      };
      const pay = makeIdempotent(
        async (step: Step<TX>, order: { id: string }) => {
          await step('charge', () => count('charge'));
          await step.tx('ledger', (tx) => {
            count('ledger');
            return settled(harness.ledger(tx, order.id), 'ledgered');
          });
          if (fail.after === 'ledger') throw new Error('crash after ledger');
          await step('receipt', () => count('receipt'));
          return { paid: order.id };
        },
        { steps: log, key: (order) => `pay:${order.id}`, now },
      );
      await expect(pay({ id: 'c1' })).rejects.toThrow('crash after ledger');
      fail.after = undefined;
      const done = await resumeAbandoned(log, { 'pay:': pay, 'other:': pay }, { now });
      expect(done).toEqual([{ key: 'pay:c1', outcome: 'completed', lastStep: 'ledger' }]);
      expect(await pay({ id: 'c1' })).toEqual({ paid: 'c1' });
      expect(calls).toEqual({ charge: 1, ledger: 1, receipt: 1 });
      expect(await harness.ledgerRows('c1')).toBe(1);
      // Nothing left to resume.
      expect(await resumeAbandoned(log, { 'pay:': pay }, { now })).toEqual([]);
    });

    it('derived keys are stable per key and step, distinct per step, keyed by the secret, and hide the key', async () => {
      const seen: string[] = [];
      const run = (secret: string) =>
        makeIdempotent(
          async (step: Step<TX>, _id: string) => {
            await step('a', ({ key }) => seen.push(key));
            await step('b', ({ key }) => seen.push(key));
            return step.key('a');
          },
          { steps: harness.steps({ secret }), key: (id) => `secret-order-${id}`, now },
        );
      const first = await run(SECRET)('1');
      expect(seen[0]).toBe(first);
      expect(seen[0]).not.toBe(seen[1]);
      expect(first).toMatch(/^[A-Za-z0-9_-]{43}$/);
      expect(first).not.toContain('secret-order');
      expect(await run(`${SECRET}-other`)('2')).not.toBe(
        harness.steps({ secret: SECRET }).deriveKey('secret-order-2', 'a'),
      );
      expect(harness.steps({ secret: SECRET }).deriveKey('secret-order-1', 'a')).toBe(first);
    });

    it('a transactional step that throws rolls its writes back and records nothing', async () => {
      let attempt = 0;
      const pay = makeIdempotent(
        async (step: Step<TX>, id: string) => {
          await step.tx('ledger', (tx) => {
            attempt++;
            const written = harness.ledger(tx, id);
            // Thrown after the ledger write: the rollback must take it back.
            const fail = (): void => {
              if (attempt === 1) throw new Error('ledger failed');
            };
            return isThenable(written) ? Promise.resolve(written).then(fail) : fail();
          });
          return attempt;
        },
        { steps: harness.steps({ secret: SECRET }), key: (id) => id, now },
      );
      await expect(pay('t1')).rejects.toThrow('ledger failed');
      expect(await harness.ledgerRows('t1')).toBe(0);
      // Nothing recorded: the key was released, not kept.
      expect(await harness.store.get('t1')).toBeNull();
      expect(await pay('t1')).toBe(2);
      expect(await harness.ledgerRows('t1')).toBe(1);
    });

    it('refuses a result too large or with no stored form, a repeated name, a short secret', async () => {
      const log = harness.steps({ secret: SECRET, maxStepBytes: 64 });
      const big = makeIdempotent(
        async (step: Step<TX>, _id: string) => step('big', () => 'x'.repeat(100)),
        { steps: log, key: (id) => id, now },
      );
      await expect(big('b1')).rejects.toBeInstanceOf(StepNotStorableError);
      const opaque = makeIdempotent(
        async (step: Step<TX>, _id: string) => step('map', () => new Map()),
        { steps: log, key: (id) => id, now },
      );
      await expect(opaque('b2')).rejects.toBeInstanceOf(StepNotStorableError);
      const twice = makeIdempotent(
        async (step: Step<TX>, _id: string) => {
          await step('same', () => 1);
          return step('same', () => 2);
        },
        { steps: log, key: (id) => id, now },
      );
      await expect(twice('b3')).rejects.toBeInstanceOf(InvalidOptionError);
      expect(() => harness.steps({ secret: 'short' })).toThrow(InvalidOptionError);
      expect(() => harness.steps({ secret: SECRET, maxStepBytes: 0 })).toThrow(InvalidOptionError);
    });

    it('step records go with their key: kept while pending, deleted with the answer by the sweep', async () => {
      const fail: { after?: string } = { after: 'charge' };
      const pay = payment({}, fail);
      await expect(pay({ id: 's1', cents: 1 })).rejects.toThrow();
      const recorded = await harness.stepsColumn('pay:s1');
      expect(JSON.parse(recorded ?? 'null')).toMatchObject({
        args: expect.anything(),
        steps: [['charge', expect.anything()]],
      });
      // A pending key is never swept, whatever its deadline.
      expect(await harness.store.sweepBatch(1e10, 100)).toBe(0);
      expect(await harness.stepsColumn('pay:s1')).toBe(recorded);
      fail.after = undefined;
      await pay({ id: 's1', cents: 1 });
      expect(await harness.store.sweepBatch(1e10, 100)).toBe(1);
      expect(await harness.store.get('pay:s1')).toBeNull();
    });

    // A two-step call whose second step fails once: the first step's record stays on the key.
    function sealedPayment(log: StepLog<TX>, calls: { charge: number }, fail: { on: boolean }) {
      return makeIdempotent(
        async (step: Step<TX>, card: string) => {
          const charge = await step('charge', () => {
            calls.charge++;
            return { charged: `plain-charge-${card}` };
          });
          await step('receipt', () => {
            if (fail.on) throw new Error('receipt failed');
          });
          return charge.charged;
        },
        { steps: log, key: (card) => `seal:${card}`, now },
      );
    }

    it('with encryption on, a step record is sealed in the row and the next owner opens it', async () => {
      const sealed = await harness.reopen({ keys: { old: OLD_KEY }, current: 'old' });
      const calls = { charge: 0 };
      const fail = { on: true };
      const pay = sealedPayment(sealed.steps({ secret: SECRET }), calls, fail);
      await expect(pay('4242')).rejects.toThrow('receipt failed');
      const stored = (await harness.stepsColumn('seal:4242')) ?? '';
      expect(stored).toMatch(/^\$aes256gcm:old:/);
      // Neither the result nor the recorded arguments appear in the raw column.
      expect(stored).not.toContain('plain-charge');
      expect(stored).not.toContain('4242');
      fail.on = false;
      expect(await pay('4242')).toBe('plain-charge-4242');
      expect(calls.charge).toBe(1);
    });

    it('a step record sealed under a key the keyring lacks is refused, never run again, and kept', async () => {
      const sealed = await harness.reopen({ keys: { old: OLD_KEY }, current: 'old' });
      const calls = { charge: 0 };
      const fail = { on: true };
      await expect(
        sealedPayment(sealed.steps({ secret: SECRET }), calls, fail)('5555'),
      ).rejects.toThrow('receipt failed');
      const stored = await harness.stepsColumn('seal:5555');
      fail.on = false;
      const other = await harness.reopen({ keys: { new: NEW_KEY }, current: 'new' });
      const otherLog = other.steps({ secret: SECRET });
      // The claim itself refuses the call (its fingerprint is keyed under the missing key too).
      await expect(sealedPayment(otherLog, calls, fail)('5555')).rejects.toBeInstanceOf(
        IdempotencyError,
      );
      const [row] = await harness.store.pendingKeys({ now: now(), prefix: 'seal:' });
      await expect(otherLog.read('seal:5555', row?.fingerprint ?? '')).rejects.toBeInstanceOf(
        EncryptionKeyMissingError,
      );
      // The completer reports the key as failed with the typed error and runs nothing.
      clock += 1000;
      const resumed = await resumeAbandoned(
        otherLog,
        {
          'seal:': sealedPayment(otherLog, calls, fail),
        },
        { now },
      );
      expect(resumed).toEqual([
        { key: 'seal:5555', outcome: 'failed', error: expect.any(EncryptionKeyMissingError) },
      ]);
      // A store with no keyring at all refuses the record the same way.
      const plainStore = await harness.reopen();
      await expect(
        plainStore.steps({ secret: SECRET }).read('seal:5555', row?.fingerprint ?? ''),
      ).rejects.toBeInstanceOf(EncryptionKeyMissingError);
      expect(calls.charge).toBe(1);
      expect(await harness.stepsColumn('seal:5555')).toBe(stored);
      expect(await harness.store.get('seal:5555')).toMatchObject({ status: 'pending' });
      // Once the key is back in the keyring the call goes on from the recorded charge.
      expect(await sealedPayment(sealed.steps({ secret: SECRET }), calls, fail)('5555')).toBe(
        'plain-charge-5555',
      );
      expect(calls.charge).toBe(1);
    });

    it('rekey re-seals step records under the current key, so the retired key can go', async () => {
      const sealed = await harness.reopen({ keys: { old: OLD_KEY }, current: 'old' });
      const calls = { charge: 0 };
      const fail = { on: true };
      await expect(
        sealedPayment(sealed.steps({ secret: SECRET }), calls, fail)('6666'),
      ).rejects.toThrow('receipt failed');
      const rotated = await harness.reopen({
        keys: { old: OLD_KEY, new: NEW_KEY },
        current: 'new',
      });
      const result = await rotated.store.rekey();
      expect(result.unreadable).toEqual([]);
      expect(result.resealed).toBeGreaterThanOrEqual(1);
      expect(await harness.stepsColumn('seal:6666')).toMatch(/^\$aes256gcm:new:/);
      // A keyring without the retired key opens the record now.
      const retired = await harness.reopen({ keys: { new: NEW_KEY }, current: 'new' });
      const [row] = await harness.store.pendingKeys({ now: now(), prefix: 'seal:' });
      const text = await retired
        .steps({ secret: SECRET })
        .read('seal:6666', row?.fingerprint ?? '');
      expect(JSON.parse(text ?? 'null')).toMatchObject({ steps: [['charge', expect.anything()]] });
      fail.on = false;
      expect(await sealedPayment(rotated.steps({ secret: SECRET }), calls, fail)('6666')).toBe(
        'plain-charge-6666',
      );
      expect(calls.charge).toBe(1);
    });

    it('an erasure deletes a done key with its step records and leaves a pending one with its own', async () => {
      const fail = { on: true };
      const pay = makeIdempotent(
        async (step: Step<TX>, id: string) => {
          await step('charge', () => `ch-${id}`);
          if (id === 'e-pending' && fail.on) throw new Error('crash after charge');
          return id;
        },
        { steps: harness.steps({ secret: SECRET }), key: (id) => storedId('customer-9', id), now },
      );
      await expect(pay('e-pending')).rejects.toThrow('crash after charge');
      await pay('e-done');
      const done = storedId('customer-9', 'e-done');
      const pending = storedId('customer-9', 'e-pending');
      expect(await harness.stepsColumn(done)).not.toBeNull();
      const store = harness.store as LeasedIdempotencyStore<unknown> & {
        erase(options: { scope: string }): Promise<{ erased: string[]; pending: string[] }>;
      };
      expect(await store.erase({ scope: 'customer-9' })).toEqual({
        erased: ['e-done'],
        pending: ['e-pending'],
      });
      expect(await harness.stepsColumn(done)).toBeNull();
      expect(await harness.store.get(done)).toBeNull();
      expect(await harness.stepsColumn(pending)).toMatch(/charge/);
      fail.on = false;
      expect(await pay('e-pending')).toBe('e-pending');
    });
  });
}
