import amqp from 'amqplib';
import { sql } from 'drizzle-orm';
import { CallInProgressError, KeyReusedError, makeIdempotent } from '../../src/function/index.js';
import { openSqliteStore, sqliteTransaction } from '../../src/sqlite/index.js';
import { CREATE_CREDITS, type CreditMessage, credits } from './schema.js';

/** Options of {@link startConsumer}. */
export interface ConsumerOptions {
  /** The broker, e.g. `amqp://guest:guest@127.0.0.1:5672`. */
  readonly url: string;
  /** The queue to consume (declared durable if missing). */
  readonly queue: string;
  /** The SQLite file holding both the idempotency keys and the credits. */
  readonly dbPath: string;
  /** How long a message being applied owns its key without renewal. */
  readonly leaseSeconds?: number;
  /**
   * Milliseconds the handler stays inside its transaction after writing the credit: lets a test
   * kill the process between the effect and the commit. 0 in real use.
   */
  readonly holdMs?: number;
  /** Called inside the transaction just before the hold, with the message id. */
  readonly onHold?: (id: string) => void;
  /** Called after each message is settled, with what happened to it. */
  readonly onSettled?: (id: string, outcome: 'acked' | 'requeued' | 'rejected') => void;
}

/** A running consumer. */
export interface Consumer {
  /** Stops consuming, waits for the message in hand, closes the connection and the database. */
  close(): Promise<void>;
}

// Blocks the thread, as a long synchronous step inside the transaction would.
function hold(ms: number): void {
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);
}

function parse(content: Buffer): CreditMessage | undefined {
  try {
    const value = JSON.parse(content.toString('utf8')) as Partial<CreditMessage>;
    if (
      typeof value.id === 'string' &&
      typeof value.account === 'string' &&
      Number.isSafeInteger(value.amount)
    ) {
      return value as CreditMessage;
    }
  } catch {}
  return undefined;
}

/**
 * Consumes credit messages with at-least-once delivery (manual ack, one message at a time) and
 * applies each message's credit exactly once: the credit row and the stored result commit in one
 * SQLite transaction keyed by the message id, and the message is acknowledged only after that
 * commit. A redelivered or duplicated message replays the stored result and is acknowledged
 * without a second credit.
 */
export async function startConsumer(options: ConsumerOptions): Promise<Consumer> {
  const store = openSqliteStore(options.dbPath);
  store.db.run(sql.raw(CREATE_CREDITS));
  const holdMs = options.holdMs ?? 0;
  const credit = makeIdempotent(
    (tx, message: CreditMessage) => {
      tx.insert(credits)
        .values({ messageId: message.id, account: message.account, amount: message.amount })
        .run();
      if (holdMs > 0) {
        options.onHold?.(message.id);
        hold(holdMs);
      }
      return { credited: message.amount };
    },
    {
      transaction: sqliteTransaction(store),
      key: (message) => `credit:${message.id}`,
      ...(options.leaseSeconds === undefined ? {} : { leaseSeconds: options.leaseSeconds }),
      // A redelivery racing the first delivery waits for it instead of bouncing off the queue.
      wait: { timeoutMs: 30_000, intervalMs: 50 },
    },
  );

  const connection = await amqp.connect(options.url);
  const channel = await connection.createChannel();
  await channel.assertQueue(options.queue, { durable: true });
  await channel.prefetch(1);
  let inHand: Promise<void> = Promise.resolve();

  const { consumerTag } = await channel.consume(options.queue, (delivery) => {
    if (delivery === null) return;
    inHand = (async () => {
      const message = parse(delivery.content);
      if (message === undefined) {
        channel.reject(delivery, false);
        options.onSettled?.('', 'rejected');
        return;
      }
      try {
        await credit(message);
        channel.ack(delivery);
        options.onSettled?.(message.id, 'acked');
      } catch (error) {
        // Another payload under the same id is a publisher bug: retrying cannot fix it.
        const retry = !(error instanceof KeyReusedError);
        if (!(error instanceof CallInProgressError)) console.error(error);
        channel.nack(delivery, false, retry);
        options.onSettled?.(message.id, retry ? 'requeued' : 'rejected');
      }
    })();
  });

  return {
    async close() {
      await channel.cancel(consumerTag);
      await inHand;
      await channel.close();
      await connection.close();
      store.close();
    },
  };
}
