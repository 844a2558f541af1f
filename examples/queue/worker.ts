// One consumer process of the queue example. Configuration comes from the environment:
//   AMQP_URL             the broker (default amqp://guest:guest@127.0.0.1:5672)
//   QUEUE                the queue to consume (default credits)
//   QUEUE_DB             the SQLite file of keys and credits (default ./queue.db)
//   QUEUE_LEASE_SECONDS  how long a message in hand owns its key (default 30)
//   QUEUE_HOLD_MS        stay this long between the credit and its commit (default 0; for crash tests)
// It prints `ready` once consuming, `settled <id> <outcome>` per message and, with a hold,
// `holding <id>` between a credit and its commit; SIGTERM stops it.
import { startConsumer } from './consumer.js';

function numberFromEnv(name: string, fallback: number): number {
  const raw = process.env[name];
  if (raw === undefined || raw === '') return fallback;
  const value = Number(raw);
  if (!Number.isFinite(value) || value < 0) {
    throw new Error(`${name} must be a non-negative number, got ${JSON.stringify(raw)}`);
  }
  return value;
}

const consumer = await startConsumer({
  url: process.env.AMQP_URL || 'amqp://guest:guest@127.0.0.1:5672',
  queue: process.env.QUEUE || 'credits',
  dbPath: process.env.QUEUE_DB || './queue.db',
  leaseSeconds: numberFromEnv('QUEUE_LEASE_SECONDS', 30),
  holdMs: numberFromEnv('QUEUE_HOLD_MS', 0),
  onSettled: (id, outcome) => console.log(`settled ${id} ${outcome}`),
  onHold: (id) => console.log(`holding ${id}`),
});
console.log('ready');
process.once('SIGTERM', () => {
  consumer.close().then(
    () => process.exit(0),
    (error: unknown) => {
      console.error(error);
      process.exit(1);
    },
  );
});
