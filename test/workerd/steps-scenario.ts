// The step log's scenario inside workerd, written once for D1 (test/workerd/worker.ts) and a
// Durable Object's SQLite (test/workerd/durable-worker.ts): each answers what it observed, and
// the test files compare it with what the step rules promise (docs/steps.md).
import {
  makeIdempotent,
  type Step,
  type StepLog,
  type StepLogOptions,
} from '../../src/function/index.js';
import type { Keyring } from '../../src/index.js';

/** A runtime's step logs and its ledger table. */
export interface StepsScenarioHarness<TX> {
  /** A step log over a store of the runtime, sealing with `keyring` when given. */
  steps(options: StepLogOptions, keyring?: Keyring): StepLog<TX>;
  /** Writes (or queues) a ledger row for `id` in the step's transaction. */
  ledger(tx: TX, id: string): void;
  /** The ledger rows of `id`. */
  ledgerRows(id: string): Promise<number>;
  /** The raw `steps` column of `key`'s row. */
  stepsColumn(key: string): Promise<string | null>;
}

const SECRET = 'a workerd secret of 16+ bytes';
const KEYRING: Keyring = { keys: { k1: new Uint8Array(32).fill(3) }, current: 'k1' };

function nameOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

/**
 * A three-step payment that fails once after its transactional step, then completes and replays;
 * the same with the store sealing; and a taken-over owner whose record and transactional step are
 * refused.
 */
export async function stepsScenario<TX>(harness: StepsScenarioHarness<TX>, prefix: string) {
  const calls = { charge: 0, ledger: 0, receipt: 0 };
  let fail = true;
  const payment = (log: StepLog<TX>) =>
    makeIdempotent(
      async (step: Step<TX>, id: string) => {
        const charge = await step('charge', ({ key }) => {
          calls.charge++;
          return { id: `ch-${id}`, derived: key.length, at: new Date(7000) };
        });
        await step.tx('ledger', (tx) => {
          calls.ledger++;
          harness.ledger(tx, id);
          return 'ledgered';
        });
        if (fail) throw new Error('crash after ledger');
        const receipt = await step('receipt', () => {
          calls.receipt++;
          return `r-${id}`;
        });
        return { charge: charge.id, derived: charge.derived, at: charge.at.getTime(), receipt };
      },
      { steps: log, key: (id) => `${prefix}:${id}` },
    );
  const pay = payment(harness.steps({ secret: SECRET }));
  const failed = await pay('p1').catch(nameOf);
  const recorded = JSON.parse((await harness.stepsColumn(`${prefix}:p1`)) ?? 'null') as {
    steps: [string, unknown][];
  } | null;
  fail = false;
  const answer = await pay('p1');
  const replay = await pay('p1');
  const plain = { failed, recorded: recorded?.steps.map(([name]) => name), answer, replay };

  fail = true;
  const sealedPay = payment(harness.steps({ secret: SECRET }, KEYRING));
  const sealedFailed = await sealedPay('s1').catch(nameOf);
  const stored = (await harness.stepsColumn(`${prefix}:s1`)) ?? '';
  fail = false;
  const sealed = {
    failed: sealedFailed,
    sealedUnder: stored.split(':')[1],
    plaintext: stored.includes('ch-s1') || stored.includes('charge'),
    answer: await sealedPay('s1'),
  };

  const log = harness.steps({ secret: SECRET });
  const key = `${prefix}:stale`;
  const old = await log.store.acquire(key, 'd', { expires: 1e6, now: 1, leaseSeconds: 10 });
  const taker = await log.store.acquire(key, 'd', { expires: 1e6, now: 20, leaseSeconds: 10 });
  const owner = {
    key,
    fingerprint: 'd',
    fencingToken: old.status === 'acquired' ? old.fencingToken : -1,
  };
  const fenced = {
    taker: taker.status,
    write: await log.write(owner, '{"steps":[]}'),
    transact: await log.transact(
      owner,
      (tx) => {
        harness.ledger(tx, 'stale');
        return 'stale';
      },
      () => '{"steps":[["ledger",null]]}',
    ),
    ledger: await harness.ledgerRows('stale'),
    column: await harness.stepsColumn(key),
  };
  return {
    plain,
    sealed,
    fenced,
    calls,
    ledger: { p1: await harness.ledgerRows('p1'), s1: await harness.ledgerRows('s1') },
  };
}

/** What {@link stepsScenario} answers when the runtime keeps the step rules. */
export const STEPS_SCENARIO_EXPECTED = {
  plain: {
    failed: 'crash after ledger',
    recorded: ['charge', 'ledger'],
    answer: { charge: 'ch-p1', derived: 43, at: 7000, receipt: 'r-p1' },
    replay: { charge: 'ch-p1', derived: 43, at: 7000, receipt: 'r-p1' },
  },
  sealed: {
    failed: 'crash after ledger',
    sealedUnder: 'k1',
    plaintext: false,
    answer: { charge: 'ch-s1', derived: 43, at: 7000, receipt: 'r-s1' },
  },
  fenced: {
    taker: 'acquired',
    write: false,
    transact: { committed: false },
    ledger: 0,
    column: null,
  },
  // Each step of each key ran once, though each key's call failed once after its ledger step.
  calls: { charge: 2, ledger: 2, receipt: 2 },
  ledger: { p1: 1, s1: 1 },
};
