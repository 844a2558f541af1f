import type { ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import Database from 'better-sqlite3';
import { describe, expect, it } from 'vitest';
import { openSqliteStore } from '../../src/sqlite/index.js';
import { spawnTs } from '../support/child.js';
import { freshDbPath, tempDir } from '../support/temp.js';
import { until } from '../support/waiting.js';

const dir = tempDir('idem-crash-');
const main = fileURLToPath(new URL('../../examples/payments/main.ts', import.meta.url));
const TRIALS = 20;

function start(path: string, env: NodeJS.ProcessEnv = {}) {
  const { child, result } = spawnTs(main, [], {
    IDEM_DB: path,
    IDEM_URL: '',
    PORT: '0',
    IDEM_LEASE_SECONDS: '1',
    IDEM_SWEEP_INTERVAL_MS: '3600000',
    DATABASE_URL: '',
    ...env,
  });
  let output = '';
  const url = new Promise<string>((resolve, reject) => {
    child.stdout?.on('data', (chunk: Buffer) => {
      output += chunk.toString();
      const found = /listening on (http:\S+)/.exec(output)?.[1];
      if (found) resolve(found);
    });
    child.on('close', () => reject(new Error(`the service ended: ${output}`)));
  });
  return { child, url, ended: result };
}

function pay(url: string, key: string, amount: number): Promise<Response> {
  return fetch(`${url}/payments`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'idempotency-key': key },
    body: JSON.stringify({ amount, currency: 'EUR' }),
  });
}

// What the file holds: the payments, their receipts, and for each key its status and the payment
// its answer names.
function snapshot(path: string) {
  const db = new Database(path, { readonly: true, fileMustExist: true });
  try {
    const payments = (db.prepare('SELECT id FROM payments').all() as { id: string }[]).map(
      (row) => row.id,
    );
    const receipts = (
      db.prepare('SELECT payment_id FROM receipts').all() as { payment_id: string }[]
    ).map((row) => row.payment_id);
    const keys = db.prepare('SELECT id, status, response FROM keys').all() as {
      id: string;
      status: string;
      response: string | null;
    }[];
    const answered = keys.flatMap((key) => {
      if (key.status !== 'done' || key.response === null) return [];
      const stored = JSON.parse(key.response) as { body: string };
      return [(JSON.parse(stored.body) as { id: string }).id];
    });
    return {
      payments,
      receipts,
      answered,
      pending: keys.filter((key) => key.status === 'pending'),
    };
  } finally {
    db.close();
  }
}

// Every recorded answer names one payment row with its receipt. A payment row without an answer
// yet is a key a crash left pending after its ledger step (docs/steps.md): the retry finishes it.
function expectAnswersPaid(path: string): ReturnType<typeof snapshot> {
  const found = snapshot(path);
  expect(new Set(found.payments).size).toBe(found.payments.length);
  expect(new Set(found.receipts).size).toBe(found.receipts.length);
  for (const id of found.answered) {
    expect(found.payments).toContain(id);
    expect(found.receipts).toContain(id);
  }
  return found;
}

async function killed(child: ChildProcess, ended: Promise<unknown>): Promise<void> {
  child.kill('SIGKILL');
  await ended;
}

describe('the payments service under kill -9: each payment once, answered after the retry', () => {
  it(`${TRIALS} crashes at random points, then every unanswered key retried once`, async () => {
    const path = freshDbPath(dir);
    openSqliteStore(path).close();
    const amounts = new Map<string, number>();
    let sequence = 0;
    for (let trial = 0; trial < TRIALS; trial += 1) {
      // Every fifth trial dies exactly inside the ledger step, after the charge step.
      const exact = trial % 5 === 4;
      const service = start(path, exact ? { IDEM_CRASH_AFTER_EFFECT: '1' } : {});
      const url = await service.url;
      let stop = false;
      const client = async () => {
        while (!stop) {
          sequence += 1;
          const key = `k${sequence}`;
          amounts.set(key, sequence);
          try {
            await pay(url, key, sequence);
          } catch {
            return;
          }
        }
      };
      const clients = [client(), client(), client()];
      if (!exact) {
        // The kill lands at a random moment of the clients' traffic: the pause is the scenario.
        await new Promise((resolve) => setTimeout(resolve, Math.random() * 200));
        await killed(service.child, service.ended);
      } else {
        expect((await service.ended).signal).toBe('SIGKILL');
      }
      stop = true;
      await Promise.all(clients);
      expectAnswersPaid(path);
    }

    const before = snapshot(path);
    expect(before.pending.length).toBeGreaterThan(0);
    const service = start(path);
    try {
      const url = await service.url;
      for (const { id } of before.pending) {
        // A dead owner's lease (1 s) lapses, then the retry takes the key over and runs once.
        let status = 0;
        await until(async () => {
          status = (await pay(url, id, amounts.get(id) ?? 0)).status;
          return status !== 409;
        }, 100);
        expect(status).toBe(201);
      }
      // Every key is answered now: its payment row and its receipt exist once, and none other.
      const after = expectAnswersPaid(path);
      expect(after.pending).toEqual([]);
      expect([...after.payments].sort()).toEqual([...after.answered].sort());
      expect([...after.receipts].sort()).toEqual([...after.answered].sort());
    } finally {
      await killed(service.child, service.ended);
    }
  }, 300_000);
});
