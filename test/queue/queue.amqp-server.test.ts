import { fileURLToPath } from 'node:url';
import amqp from 'amqplib';
import Database from 'better-sqlite3';
import { afterAll, describe, expect, it } from 'vitest';
import { runQueueDemo } from '../../examples/queue/demo.js';
import type { CreditMessage } from '../../examples/queue/schema.js';
import { type RunningChild, spawnTs } from '../support/child.js';
import { uniqueName } from '../support/pg.js';
import { freshDbPath, tempDir } from '../support/temp.js';
import { until } from '../support/waiting.js';

// Runs only when AMQP_URL is set (see vitest.config.ts); then an unreachable broker fails it.
const url = process.env.AMQP_URL as string;
const WORKER = fileURLToPath(new URL('../../examples/queue/worker.ts', import.meta.url));
const dir = tempDir('idem-queue-');
const started: RunningChild[] = [];

afterAll(() => {
  for (const { child } of started) {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  }
});

function creditsPerMessage(dbPath: string): Map<string, number> {
  const db = new Database(dbPath, { readonly: true });
  try {
    const rows = db
      .prepare('SELECT message_id AS id, count(*) AS n FROM credits GROUP BY message_id')
      .all() as { id: string; n: number }[];
    return new Map(rows.map((row) => [row.id, row.n]));
  } finally {
    db.close();
  }
}

describe('queue example on RabbitMQ', () => {
  it('applies each credit once when every message is delivered twice to two consumers', async () => {
    const queue = uniqueName('q');
    const dbPath = freshDbPath(dir);
    const connection = await amqp.connect(url);
    const channel = await connection.createConfirmChannel();
    try {
      await channel.assertQueue(queue, { durable: true });
      const messages: CreditMessage[] = Array.from({ length: 30 }, (_, i) => ({
        id: `m${i}`,
        account: 'a',
        amount: i + 1,
      }));
      const env = { AMQP_URL: url, QUEUE: queue, QUEUE_DB: dbPath };
      const workers = [spawnTs(WORKER, [], env), spawnTs(WORKER, [], env)];
      started.push(...workers);
      const settled = new Map<string, number>();
      let ready = 0;
      for (const { child } of workers) {
        let partial = '';
        child.stdout?.on('data', (chunk: Buffer) => {
          const lines = (partial + chunk.toString()).split('\n');
          partial = lines.pop() ?? '';
          for (const line of lines) {
            if (line === 'ready') ready += 1;
            const id = /^settled (\S+) acked$/.exec(line)?.[1];
            if (id !== undefined) settled.set(id, (settled.get(id) ?? 0) + 1);
          }
        });
      }
      // Both consumers take part: the duplicates race each other across the two processes.
      await until(async () => ready === 2);
      for (const message of [...messages, ...messages.toReversed()]) {
        channel.sendToQueue(queue, Buffer.from(JSON.stringify(message)), { persistent: true });
      }
      await channel.waitForConfirms();
      await until(async () => {
        const acked = [...settled.values()].reduce((a, b) => a + b, 0);
        return acked === 60 && (await channel.checkQueue(queue)).messageCount === 0;
      });
      for (const { child } of workers) child.kill('SIGTERM');
      const results = await Promise.all(workers.map((worker) => worker.result));
      expect(results.map((result) => result.code)).toEqual([0, 0]);
      const credits = creditsPerMessage(dbPath);
      expect(credits.size).toBe(30);
      expect([...credits.values()].every((n) => n === 1)).toBe(true);
      expect([...settled.values()].every((n) => n === 2)).toBe(true);
    } finally {
      await channel.deleteQueue(queue);
      await connection.close();
    }
  });

  it('applies each credit once after a consumer is killed with SIGKILL mid-message', async () => {
    const result = await runQueueDemo({
      url,
      queue: uniqueName('q'),
      dbPath: freshDbPath(dir),
      messages: 12,
      leaseSeconds: 1,
    });
    expect(result.killedWith).toBe('SIGKILL');
    expect(result.pendingAfterKill).toBe(1);
    expect(result.published).toBe(24);
    expect(Object.keys(result.creditsPerMessage)).toHaveLength(12);
    expect(Object.values(result.creditsPerMessage).every((n) => n === 1)).toBe(true);
  });
});
