// The step crash test, written once for every dialect: a worker with a three-step payment
// handler (a charge through a fake provider over HTTP, a ledger row, an outbox row) is killed
// with SIGKILL between every pair of steps, and the next worker takes the keys over.
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { spawnTs } from '../support/child.js';
import { fakeProvider } from '../support/fake-provider.js';
import { uniqueName } from '../support/pg.js';

const WORKER = new URL('./steps-crash-worker.ts', import.meta.url).pathname;

/** Rounds and keys per round: at least 3 × 100; `npm run test:stress` raises both. */
const ROUNDS = Number(process.env.STEPS_CRASH_ROUNDS ?? 3);
const KEYS = Number(process.env.STEPS_CRASH_KEYS ?? 100);

/** Where each round kills the worker: the key (as a fraction of the round) and the point. */
const KILLS: readonly [number, string][] = [
  [0.1, 'provider'],
  [0.35, 'charge'],
  [0.6, 'ledger'],
  [0.85, 'outbox'],
];

/** One dialect's database for the crash test: the worker's target and what the test reads back. */
export interface CrashDatabase {
  /** The worker's `<dialect> <target>` arguments. */
  readonly args: readonly [string, string];
  /** Rows per key of `table` (`ledger` or `outbox`) among the keys starting with `prefix`. */
  rows(table: 'ledger' | 'outbox', prefix: string): Promise<Map<string, number>>;
  /** The ledger's charge id of each key starting with `prefix`. */
  charges(prefix: string): Promise<Map<string, string>>;
  /** The status of each key starting with `prefix` in the keys table. */
  statuses(prefix: string): Promise<Map<string, string>>;
  close(): Promise<void>;
}

async function killAt(args: string[], marker: string): Promise<void> {
  const running = spawnTs(WORKER, args);
  let seen = '';
  await new Promise<void>((resolve, reject) => {
    running.child.stdout?.on('data', (chunk: Buffer) => {
      seen += chunk.toString();
      if (seen.includes(marker)) resolve();
    });
    running.result.then(
      (result) => reject(new Error(`the worker ended before ${marker}: ${result.stderr}`)),
      reject,
    );
  });
  running.child.kill('SIGKILL');
  expect((await running.result).signal).toBe('SIGKILL');
}

async function payAll(args: string[]): Promise<Map<string, string>> {
  const result = await spawnTs(WORKER, args).result;
  expect(result.stderr).toBe('');
  expect(result.code).toBe(0);
  const answers = new Map<string, string>();
  for (const match of result.stdout.matchAll(/^answer (\S+) (.*)$/gm)) {
    answers.set(match[1] as string, match[2] as string);
  }
  return answers;
}

export function stepsCrashSuite(name: string, open: () => Promise<CrashDatabase>): void {
  describe(`steps on ${name}, the worker killed with SIGKILL between every pair of steps`, () => {
    const provider = fakeProvider();
    let url = '';
    let database: CrashDatabase;
    beforeAll(async () => {
      await new Promise<void>((resolve) => provider.server.listen(0, '127.0.0.1', resolve));
      url = `http://127.0.0.1:${(provider.server.address() as AddressInfo).port}`;
      database = await open();
    });
    afterAll(async () => {
      await database?.close();
      await new Promise((resolve) => provider.server.close(resolve));
    });

    it(`${ROUNDS} rounds × ${KEYS} keys: one charge, one ledger row, one outbox row each, the same answer on every retry`, async () => {
      for (let round = 0; round < ROUNDS; round++) {
        const prefix = uniqueName('c');
        const worker = (stop: string) => [...database.args, url, prefix, String(KEYS), stop];
        for (const [at, point] of KILLS) {
          const n = Math.floor(at * KEYS);
          await killAt(worker(`${n}:${point}`), `at ${prefix}-${n} ${point}`);
        }
        const answers = await payAll(worker('none'));
        const replays = await payAll(worker('none'));
        const keys = Array.from({ length: KEYS }, (_, n) => `${prefix}-${n}`);
        expect([...answers.keys()]).toEqual(keys);
        expect(replays).toEqual(answers);

        const ledger = await database.rows('ledger', prefix);
        const outbox = await database.rows('outbox', prefix);
        const charges = await database.charges(prefix);
        const statuses = await database.statuses(prefix);
        for (const key of keys) {
          expect({ key, ledger: ledger.get(key), outbox: outbox.get(key) }).toEqual({
            key,
            ledger: 1,
            outbox: 1,
          });
          expect(statuses.get(key)).toBe('done');
          expect(provider.executions.get(key)).toBe(1);
          // Every retry of a charge reached the provider with the same derived key.
          expect(provider.keysOfOrder.get(key)?.size).toBe(1);
          // The ledger holds the charge the answer reports.
          expect(JSON.parse(answers.get(key) as string)).toEqual({
            order: key,
            charge: charges.get(key),
          });
        }
      }
      // Minutes on a loaded machine: each kill starts a worker process and waits out a lease.
    }, 900_000);
  });
}
