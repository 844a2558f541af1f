import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import express, { type NextFunction, type Request, type Response } from 'express';
import { keepRawBody } from '../../src/http/express.js';
import { PROMETHEUS_CONTENT_TYPE, prometheusStats } from '../../src/observe/index.js';
import type { PaymentsBackend } from './backend.js';
import type { Drain } from './drain.js';
import { fakeProvider, type PaymentProvider } from './provider.js';
import type { Payment } from './schema.js';

/** Options of {@link createPaymentsApp}. */
export interface PaymentsAppOptions {
  /** How long answers are replayed, in seconds. */
  readonly ttlSeconds: number;
  /** The clock in seconds, shared with the sweep. */
  readonly now: () => number;
  /** The lease of a payment in flight, in seconds (default 30): a crashed request's key is retried after it. */
  readonly leaseSeconds?: number;
  /**
   * Kill this process with SIGKILL right after the payment row is written and before its
   * transaction commits: the crash the demo and the tests make, between effect and answer.
   */
  readonly crashAfterEffect?: boolean;
  /**
   * The claims a graceful stop waits for (see `createDrain`): new requests are refused once it
   * began, and every payment in flight is counted until its key is finished or released.
   */
  readonly drain?: Drain;
  /** The card processor; default an in-process {@link fakeProvider}. */
  readonly provider?: PaymentProvider;
  /**
   * The key of the payment steps' derived keys (at least 16 bytes), the same in every process of
   * the service. Default: the example's own, fine for a demo only.
   */
  readonly stepSecret?: string;
}

/** The example's step secret when none is given: public, so only for a demo. */
const DEMO_STEP_SECRET = 'payments-example-step-secret';

interface PaymentRequest {
  amount: number;
  currency: string;
  delay_ms?: number;
}

const MAX_DELAY_MS = 5000;
// The largest JSON body accepted, after decompression: express.json's default, named so that the
// check on Content-Length and the parser agree.
const BODY_LIMIT_BYTES = 100 * 1024;

function problem(
  res: Response,
  status: number,
  title: string,
  detail: string,
  type = 'invalid-body',
): void {
  res
    .status(status)
    .type('application/problem+json')
    .send(JSON.stringify({ type: `urn:payments-example:problem:${type}`, title, status, detail }));
}

// What body-parser's errors mean to a client, by their `type`. Their messages are not sent: a
// fixed sentence per kind says it without echoing anything from inside the server.
const BODY_ERRORS: Record<string, { readonly title: string; readonly detail: string }> = {
  'entity.parse.failed': { title: 'Invalid payment', detail: 'the body is not valid JSON' },
  'entity.too.large': {
    title: 'Request body too large',
    detail: 'the body (after decompression) is larger than this service accepts',
  },
  'encoding.unsupported': {
    title: 'Unsupported Content-Encoding',
    detail: 'send the body as identity, gzip, deflate or br',
  },
  'charset.unsupported': {
    title: 'Unsupported charset',
    detail: 'send the JSON body as UTF-8',
  },
  'request.aborted': { title: 'Request aborted', detail: 'the body ended before it was complete' },
  'request.size.invalid': {
    title: 'Request body size mismatch',
    detail: 'the body did not match its Content-Length',
  },
};

// A refused body may not have been read to its end (body-parser leaves an unsupported encoding
// unread, and a client may still be sending): the next request on that keep-alive connection would
// start inside this body's leftover bytes. Closing the connection after the answer keeps every
// refusal from spilling into the request after it.
function refuseBody(
  res: Response,
  status: number,
  title: string,
  detail: string,
  type: string,
): void {
  res.set('connection', 'close');
  problem(res, status, title, detail, type);
}

// A body declared larger than the limit is refused before a byte of it is read: the parser would
// read (and throw away) all of it before answering. Only an identity body: a compressed one's
// limit applies to what it inflates to, which the parser checks as it reads.
function refuseOversizeBody(req: Request, res: Response, next: NextFunction): void {
  const declared = Number(req.headers['content-length']);
  const encoding = (req.headers['content-encoding'] ?? 'identity').toLowerCase();
  const tooLarge = BODY_ERRORS['entity.too.large'];
  if (encoding === 'identity' && declared > BODY_LIMIT_BYTES && tooLarge) {
    refuseBody(res, 413, tooLarge.title, tooLarge.detail, 'unreadable-body');
  } else {
    next();
  }
}

/**
 * The error handler a real service installs last: every error becomes an
 * `application/problem+json` answer, a client error with its own status (a body too large, a
 * gzip bomb, broken gzip, an unsupported encoding, bad JSON) and anything else a 500 whose details
 * go to the log, never to the client: no stack trace, no file path.
 */
function problemErrors(error: unknown, _req: Request, res: Response, next: NextFunction): void {
  if (res.headersSent) {
    next(error);
    return;
  }
  const { type, status } = (error ?? {}) as { type?: unknown; status?: unknown };
  const known = typeof type === 'string' ? BODY_ERRORS[type] : undefined;
  const clientStatus = typeof status === 'number' && status >= 400 && status < 500 ? status : 0;
  if (known && clientStatus) {
    const kind = type === 'entity.parse.failed' ? 'invalid-body' : 'unreadable-body';
    refuseBody(res, clientStatus, known.title, known.detail, kind);
  } else if (clientStatus) {
    // Broken gzip or deflate data, and any other client error a parser reports.
    refuseBody(
      res,
      clientStatus,
      'Unreadable request body',
      'the body could not be read',
      'unreadable-body',
    );
  } else {
    console.error('request failed:', error);
    problem(res, 500, 'Internal error', 'the request failed; it has been logged', 'internal');
  }
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
 * store's gauges for Prometheus on `GET /metrics`. Payments live in the same database as the keys
 * (see {@link PaymentsBackend}): SQLite, PostgreSQL or MySQL.
 */
export function createPaymentsApp(
  backend: PaymentsBackend,
  options: PaymentsAppOptions,
): express.Express {
  const app = express();
  app.disable('x-powered-by');
  // The parser keeps the bytes it read, so the idempotency layer fingerprints the body as written.
  if (options.drain) app.use(options.drain.refuseWhenStopping);
  app.use(refuseOversizeBody, express.json({ limit: BODY_LIMIT_BYTES, verify: keepRawBody }));

  // The payment runs in steps recorded under its key: a crash at any point leaves the steps done
  // so far, and the retry goes on from them, so the card is charged and the rows written once.
  const provider = options.provider ?? fakeProvider();
  const postPayment = backend.postPayment({
    create: (req) => {
      const body = req.body as PaymentRequest;
      return {
        id: `pay_${randomUUID()}`,
        amount: body.amount,
        currency: body.currency.toUpperCase(),
        createdAt: options.now(),
      };
    },
    charge: (payment, key) => provider.charge(payment, key),
    afterWrite: () => {
      if (options.crashAfterEffect) process.kill(process.pid, 'SIGKILL');
    },
    // Slow processing after the key is claimed (duplicates get 409 meanwhile).
    prepare: async (req) => {
      const { delay_ms: delayMs } = req.body as PaymentRequest;
      if (delayMs) await sleep(delayMs);
    },
    secret: options.stepSecret ?? DEMO_STEP_SECRET,
    options: {
      // Every client shares one space of keys here: the example has no authentication. An API
      // with callers passes a function naming the caller instead.
      scope: 'global',
      ttlSeconds: options.ttlSeconds,
      now: options.now,
      ...(options.leaseSeconds === undefined ? {} : { leaseSeconds: options.leaseSeconds }),
    },
  });
  app.post(
    '/payments',
    validatePayment,
    options.drain ? options.drain.track(postPayment) : postPayment,
  );

  app.get('/payments', async (_req, res) => {
    const all: Payment[] = await backend.listPayments();
    res.json(all);
  });

  // What the Location header of a created payment names.
  app.get('/payments/:id', async (req, res) => {
    const payment = await backend.getPayment(req.params.id);
    if (payment === undefined) {
      problem(res, 404, 'Not found', 'no payment with this id', 'not-found');
    } else {
      res.json(payment);
    }
  });

  app.get('/metrics', async (_req, res) => {
    res.type(PROMETHEUS_CONTENT_TYPE).send(await prometheusStats(backend.store, options.now()));
  });

  app.use((_req, res) => {
    problem(res, 404, 'Not found', 'no such resource', 'not-found');
  });
  app.use(problemErrors);
  return app;
}
