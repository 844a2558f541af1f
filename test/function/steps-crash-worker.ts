// A payment worker with a three-step handler, for the step crash test:
//   steps-crash-worker.ts <dialect> <target> <provider url> <prefix> <keys> <stop>
// dialect is sqlite (target: a file), pg (target: url#schema) or mysql (target: url). It pays the
// keys <prefix>-0 … <prefix>-<keys - 1> in order; each payment charges through the fake provider
// (with the step's derived key), writes a ledger row and an outbox row, each its own step. With
// <stop> = `<n>:<point>` it prints `at <key> <point>` when payment n reaches that point and then
// blocks, for the test to kill it there; `none` pays every key and prints `answer <key> <json>`
// for each. Points: `provider` (the provider answered, the charge not yet recorded), `charge`,
// `ledger` and `outbox` (after that step was recorded, before the next one or the answer).
import { sql } from 'drizzle-orm';
import { makeIdempotent, type Step, type StepLog } from '../../src/function/index.js';

const [dialect, target, provider, prefix, keys, stop] = process.argv.slice(2) as [
  string,
  string,
  string,
  string,
  string,
  string,
];
const [stopAt, stopPoint] = stop === 'none' ? [-1, ''] : stop.split(':');
const SECRET = 'the step crash test secret';

function pause(key: string, point: string, n: number): void {
  if (n !== Number(stopAt) || point !== stopPoint) return;
  console.log(`at ${key} ${point}`);
  // Blocks the whole process until it is killed: nothing after this point may run.
  for (;;) Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 60_000);
}

async function charge(key: string, derived: string): Promise<{ id: string }> {
  const response = await fetch(`${provider}/charge`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'idempotency-key': derived },
    body: JSON.stringify({ order: key }),
  });
  if (!response.ok) throw new Error(`the provider answered ${response.status}`);
  return (await response.json()) as { id: string };
}

interface Writes<TX> {
  readonly ledger: (tx: TX, key: string, charge: string) => void | Promise<void>;
  readonly outbox: (tx: TX, key: string) => void | Promise<void>;
}

function payment<TX>(steps: StepLog<TX>, writes: Writes<TX>) {
  return makeIdempotent(
    async (step: Step<TX>, key: string, n: number) => {
      const charged = await step('charge', async ({ key: derived }) => {
        const result = await charge(key, derived);
        pause(key, 'provider', n);
        return result;
      });
      pause(key, 'charge', n);
      await step.tx('ledger', (tx) => writes.ledger(tx, key, charged.id));
      pause(key, 'ledger', n);
      await step.tx('outbox', (tx) => writes.outbox(tx, key));
      pause(key, 'outbox', n);
      return { order: key, charge: charged.id };
    },
    {
      steps,
      key: (key) => key,
      payload: (key) => key,
      // A killed worker's lease lapses within a second; the next worker waits for that.
      leaseSeconds: 1,
      wait: { timeoutMs: 60_000, intervalMs: 50 },
    },
  );
}

async function payAll(pay: (key: string, n: number) => Promise<unknown>): Promise<void> {
  for (let n = 0; n < Number(keys); n++) {
    const key = `${prefix}-${n}`;
    const answer = await pay(key, n);
    if (stop === 'none') console.log(`answer ${key} ${JSON.stringify(answer)}`);
  }
}

if (dialect === 'sqlite') {
  const { openSqliteStore, sqliteSteps } = await import('../../src/sqlite/index.js');
  const store = openSqliteStore(target);
  // The synchronous transaction needs a synchronous step: `.run()` writes at once.
  const pay = payment(sqliteSteps(store, { secret: SECRET }), {
    ledger: (tx, key, id) => {
      tx.run(sql`INSERT INTO ledger (id, charge) VALUES (${key}, ${id})`);
    },
    outbox: (tx, key) => {
      tx.run(sql`INSERT INTO outbox (id) VALUES (${key})`);
    },
  });
  await payAll(pay);
  store.close();
} else if (dialect === 'pg') {
  const [url, schema] = target.split('#') as [string, string];
  const [{ drizzle }, pg, { PgIdempotencyStore, pgSteps }] = await Promise.all([
    import('drizzle-orm/node-postgres'),
    import('pg'),
    import('../../src/pg/index.js'),
  ]);
  const pool = new pg.default.Pool({ connectionString: url, max: 2 });
  const store = new PgIdempotencyStore(drizzle({ client: pool }), { schema });
  const table = (name: string) => sql.raw(`"${schema}".${name}`);
  const pay = payment(pgSteps(store, { secret: SECRET }), {
    ledger: async (tx, key, id) => {
      await tx.execute(sql`INSERT INTO ${table('ledger')} (id, charge) VALUES (${key}, ${id})`);
    },
    outbox: async (tx, key) => {
      await tx.execute(sql`INSERT INTO ${table('outbox')} (id) VALUES (${key})`);
    },
  });
  await payAll(async (key, n) => pay(key, n));
  await store.close();
  await pool.end();
} else {
  const { openMysqlStore, mysqlSteps } = await import('../../src/mysql/index.js');
  const store = await openMysqlStore(target);
  const pay = payment(mysqlSteps(store, { secret: SECRET }), {
    ledger: async (tx, key, id) => {
      await tx.execute(sql`INSERT INTO ledger (id, charge) VALUES (${key}, ${id})`);
    },
    outbox: async (tx, key) => {
      await tx.execute(sql`INSERT INTO outbox (id) VALUES (${key})`);
    },
  });
  await payAll(pay);
  await store.close();
}
