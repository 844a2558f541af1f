import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { asc, sql } from 'drizzle-orm';
import express, { type NextFunction, type Request, type Response } from 'express';
import { expressIdempotency } from '../../src/http/express.js';
import { PROMETHEUS_CONTENT_TYPE, prometheusStats } from '../../src/observe/index.js';
import type { SqliteIdempotencyStore } from '../../src/sqlite/index.js';
import { type Payment, payments } from './schema.js';

/** Options of {@link createPaymentsApp}. */
export interface PaymentsAppOptions {
  /** How long answers are replayed, in seconds. */
  readonly ttlSeconds: number;
  /** The clock in seconds, shared with the sweep. */
  readonly now: () => number;
}

interface PaymentRequest {
  amount: number;
  currency: string;
  delay_ms?: number;
}

const MAX_DELAY_MS = 5000;

function problem(res: Response, status: number, title: string, detail: string): void {
  res
    .status(status)
    .type('application/problem+json')
    .send(
      JSON.stringify({ type: 'urn:payments-example:problem:invalid-body', title, status, detail }),
    );
}

function invalidReason(body: unknown): string | undefined {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) {
    return 'the body must be a JSON object';
  }
  const { amount, currency, delay_ms: delayMs, ...rest } = body as Record<string, unknown>;
  const unknownFields = Object.keys(rest);
  if (unknownFields.length > 0) return `unknown fields: ${unknownFields.join(', ')}`;
  if (typeof amount !== 'number' || !Number.isSafeInteger(amount) || amount <= 0) {
    return 'amount must be a positive integer (minor units)';
  }
  if (typeof currency !== 'string' || !/^[A-Za-z]{3}$/.test(currency)) {
    return 'currency must be three letters';
  }
  if (
    delayMs !== undefined &&
    (typeof delayMs !== 'number' ||
      !Number.isInteger(delayMs) ||
      delayMs < 0 ||
      delayMs > MAX_DELAY_MS)
  ) {
    return `delay_ms must be an integer from 0 to ${MAX_DELAY_MS}`;
  }
  return undefined;
}

// Validation runs before the idempotency layer: a refused body reserves nothing, so the client can
// fix it and retry with the same key (as Stripe does for requests that fail validation).
function validatePayment(req: Request, res: Response, next: NextFunction): void {
  const reason = invalidReason(req.body);
  if (reason) problem(res, 400, 'Invalid payment', reason);
  else next();
}

/**
 * The payments API: `POST /payments` (requires `Idempotency-Key`), `GET /payments`, and the
 * store's gauges for Prometheus on `GET /metrics`. Payments live in the store's own SQLite file
 * and connection, in the `payments` table.
 */
export function createPaymentsApp(
  store: SqliteIdempotencyStore<unknown>,
  options: PaymentsAppOptions,
): express.Express {
  const { db } = store;
  db.run(sql`CREATE TABLE IF NOT EXISTS payments (
    id TEXT PRIMARY KEY,
    amount INTEGER NOT NULL,
    currency TEXT NOT NULL,
    created_at REAL NOT NULL
  )`);

  const app = express();
  app.disable('x-powered-by');
  app.use(express.json());

  app.post(
    '/payments',
    validatePayment,
    expressIdempotency(store, { ttlSeconds: options.ttlSeconds, now: options.now }),
    async (req, res) => {
      const body = req.body as PaymentRequest;
      if (body.delay_ms) await sleep(body.delay_ms);
      const payment: Payment = {
        id: `pay_${randomUUID()}`,
        amount: body.amount,
        currency: body.currency.toUpperCase(),
        createdAt: options.now(),
      };
      db.insert(payments).values(payment).run();
      res.status(201).location(`/payments/${payment.id}`).json(payment);
    },
  );

  app.get('/payments', (_req, res) => {
    res.json(db.select().from(payments).orderBy(asc(payments.createdAt), asc(payments.id)).all());
  });

  app.get('/metrics', async (_req, res) => {
    res.type(PROMETHEUS_CONTENT_TYPE).send(await prometheusStats(store, options.now()));
  });

  // A body express.json() cannot parse is a client error, answered like the others.
  app.use((error: unknown, _req: Request, res: Response, next: NextFunction) => {
    if ((error as { type?: unknown }).type === 'entity.parse.failed') {
      problem(res, 400, 'Invalid payment', 'the body is not valid JSON');
    } else {
      next(error);
    }
  });
  return app;
}
