import { type ChildProcess, spawn } from 'node:child_process';
import { createRequire } from 'node:module';
import { fileURLToPath, pathToFileURL } from 'node:url';
import amqp from 'amqplib';
import Database from 'better-sqlite3';
import type { CreditMessage } from './schema.js';

const TSX_LOADER = pathToFileURL(createRequire(import.meta.url).resolve('tsx')).href;
const WORKER = fileURLToPath(new URL('./worker.ts', import.meta.url));

/** Options of {@link runQueueDemo}. */
export interface QueueDemoOptions {
  /** The broker. */
  readonly url: string;
  /** A queue name no one else uses; it is deleted at the end. */
  readonly queue: string;
  /** A fresh SQLite file for the keys and the credits. */
  readonly dbPath: string;
  /** How many distinct messages to publish; each is published twice. Default 20. */
  readonly messages?: number;
  /** The consumers' lease, in seconds. Default 2, so the demo's takeover comes quickly. */
  readonly leaseSeconds?: number;
  /** How long the first consumer holds each message inside its transaction. Default 1000 ms. */
  readonly holdMs?: number;
  /** Progress lines. */
  readonly log?: (line: string) => void;
}

/** What the demo observed. */
export interface QueueDemoResult {
  /** Messages published, duplicates included. */
  readonly published: number;
  /** The exit signal of the first consumer (`SIGKILL`). */
  readonly killedWith: NodeJS.Signals | null;
  /** Keys left claimed (pending) by the killed consumer: its message was in hand, uncommitted. */
  readonly pendingAfterKill: number;
  /** How many credit rows each message id has: 1 each means exactly once. */
  readonly creditsPerMessage: Record<string, number>;
}

interface Worker {
  readonly process: ChildProcess;
  readonly lines: string[];
  readonly exited: Promise<NodeJS.Signals | number | null>;
}

function startWorker(options: QueueDemoOptions, holdMs: number): Worker {
  const child = spawn(process.execPath, ['--import', TSX_LOADER, WORKER], {
    env: {
      ...process.env,
      AMQP_URL: options.url,
      QUEUE: options.queue,
      QUEUE_DB: options.dbPath,
      QUEUE_LEASE_SECONDS: String(options.leaseSeconds ?? 2),
      QUEUE_HOLD_MS: String(holdMs),
    },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const lines: string[] = [];
  let buffered = '';
  child.stdout?.on('data', (chunk: Buffer) => {
    buffered += chunk.toString();
    const parts = buffered.split('\n');
    buffered = parts.pop() ?? '';
    lines.push(...parts);
  });
  const exited = new Promise<NodeJS.Signals | number | null>((resolve) =>
    child.on('exit', (code, signal) => resolve(signal ?? code)),
  );
  return { process: child, lines, exited };
}

async function until(condition: () => boolean | Promise<boolean>, what: string): Promise<void> {
  const giveUp = performance.now() + 120_000;
  while (!(await condition())) {
    if (performance.now() > giveUp) throw new Error(`gave up waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

function creditsPerMessage(dbPath: string): Record<string, number> {
  const db = new Database(dbPath, { readonly: true });
  try {
    const rows = db
      .prepare('SELECT message_id AS id, count(*) AS n FROM credits GROUP BY message_id')
      .all() as { id: string; n: number }[];
    return Object.fromEntries(rows.map((row) => [row.id, row.n]));
  } finally {
    db.close();
  }
}

function pendingKeys(dbPath: string): number {
  const db = new Database(dbPath, { readonly: true });
  try {
    return (
      db.prepare("SELECT count(*) AS n FROM keys WHERE status = 'pending'").get() as {
        n: number;
      }
    ).n;
  } finally {
    db.close();
  }
}

/**
 * The queue example end to end: publishes every message twice, starts a consumer process, kills
 * it with SIGKILL while it holds a message inside its transaction, starts a second consumer, and
 * waits until every message is applied and the queue is empty. Returns the credits per message.
 */
export async function runQueueDemo(options: QueueDemoOptions): Promise<QueueDemoResult> {
  const log = options.log ?? (() => undefined);
  const count = options.messages ?? 20;
  const messages: CreditMessage[] = Array.from({ length: count }, (_, i) => ({
    id: `msg-${i + 1}`,
    account: `acct-${(i % 3) + 1}`,
    amount: 10 * (i + 1),
  }));
  const workers: Worker[] = [];
  const connection = await amqp.connect(options.url);
  try {
    const channel = await connection.createConfirmChannel();
    await channel.assertQueue(options.queue, { durable: true });
    try {
      // At-least-once publishers resend: every message goes out twice.
      for (const message of [...messages, ...messages]) {
        channel.sendToQueue(options.queue, Buffer.from(JSON.stringify(message)), {
          persistent: true,
          messageId: message.id,
        });
      }
      await channel.waitForConfirms();
      log(`published ${messages.length} messages twice each`);

      const first = startWorker(options, options.holdMs ?? 1000);
      workers.push(first);
      // Killed while it holds its third message between the credit and the commit.
      await until(
        () => first.lines.filter((line) => line.startsWith('holding')).length >= 3,
        'the first consumer to hold its third message',
      );
      first.process.kill('SIGKILL');
      const killedWith = (await first.exited) as NodeJS.Signals | null;
      const pendingAfterKill = pendingKeys(options.dbPath);
      log(`killed the first consumer (${killedWith}) with ${pendingAfterKill} message in hand`);

      const second = startWorker(options, 0);
      workers.push(second);
      await until(async () => {
        const applied = Object.keys(creditsPerMessage(options.dbPath)).length;
        const { messageCount } = await channel.checkQueue(options.queue);
        return applied === count && messageCount === 0 && pendingKeys(options.dbPath) === 0;
      }, 'every message to be applied');
      second.process.kill('SIGTERM');
      await second.exited;
      log('the second consumer drained the queue');
      return {
        published: messages.length * 2,
        killedWith,
        pendingAfterKill,
        creditsPerMessage: creditsPerMessage(options.dbPath),
      };
    } finally {
      // A demo that failed half-way leaves no consumer behind.
      for (const worker of workers) {
        if (worker.process.exitCode === null && worker.process.signalCode === null) {
          worker.process.kill('SIGKILL');
        }
      }
      await channel.deleteQueue(options.queue);
      await channel.close();
    }
  } finally {
    await connection.close();
  }
}
