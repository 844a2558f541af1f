// Child process: one Express server with the same payments route five times, at argv[2] (SQLite
// file) and argv[3] (Redis URL), and prints its port:
//   POST /payments               behind our Express middleware over the SQLite store (group commit),
//   POST /plain/payments         without any idempotency layer,
//   POST /store/payments         with the middleware's two store calls made by hand, no layer,
//   POST /transactional/payments our transactional form: the payment and its answer in one commit,
//   POST /peer/payments          behind a middleware over @node-idempotency/core on Redis.
// GET /cpu answers the process's CPU time so far (`process.cpuUsage()`).
// The route validates the body, inserts the payment on the store's connection and answers 201.
import { randomUUID } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import { Idempotency, IdempotencyError } from '@node-idempotency/core';
import { RedisStorageAdapter } from '@node-idempotency/storage-adapter-redis';
import express, { type NextFunction, type Request, type Response } from 'express';
import { shippedExpress, shippedSqlite } from '../support/shipped.js';

const { expressIdempotency, expressTransaction, keepRawBody } = shippedExpress;
const { openSqliteStore, SqliteGroupCommitStore, sqliteTransaction } = shippedSqlite;

const [path, redisUrl] = process.argv.slice(2);
if (path === undefined || redisUrl === undefined) {
  throw new Error('usage: http-server.ts SQLITE_PATH REDIS_URL');
}
const store = openSqliteStore(path);
const client = store.db.$client;
client.exec(`CREATE TABLE IF NOT EXISTS payments (
  id TEXT PRIMARY KEY, amount INTEGER NOT NULL, currency TEXT NOT NULL, created_at REAL NOT NULL)`);
const insertPayment = client.prepare(
  'INSERT INTO payments (id, amount, currency, created_at) VALUES (?, ?, ?, ?)',
);

function validate(req: Request, res: Response, next: NextFunction): void {
  const body = req.body as { amount?: unknown; currency?: unknown } | undefined;
  if (
    typeof body?.amount !== 'number' ||
    !Number.isSafeInteger(body.amount) ||
    typeof body.currency !== 'string' ||
    !/^[A-Za-z]{3}$/.test(body.currency)
  ) {
    res.status(400).type('application/problem+json').send('{"title":"Invalid payment"}');
  } else {
    next();
  }
}

// Inserts the payment of `req`'s body, on the store's connection: inside the transactional
// form's transaction when one is open.
function insertFrom(req: Request) {
  const body = req.body as { amount: number; currency: string };
  const payment = {
    id: `pay_${randomUUID()}`,
    amount: body.amount,
    currency: body.currency.toUpperCase(),
    createdAt: Date.now() / 1000,
  };
  if (
    insertPayment.run(payment.id, payment.amount, payment.currency, payment.createdAt).changes !== 1
  ) {
    throw new Error('the payment was not inserted');
  }
  return payment;
}

function pay(req: Request, res: Response): void {
  const payment = insertFrom(req);
  res.status(201).location(`/payments/${payment.id}`).json(payment);
}

// @node-idempotency/core wrapped the way its Express adapter does: onRequest before the route (a
// stored response is sent as is), onResponse with the body and status before the answer goes out.
const storage = new RedisStorageAdapter({ url: redisUrl });
await storage.connect();
const idempotency = new Idempotency(storage, { cacheTTLMS: 3600 * 1000 });
const peerStatus: Record<string, number> = {
  IDEMPOTENCY_KEY_LEN_EXEEDED: 400,
  IDEMPOTENCY_KEY_MISSING: 400,
  IDEMPOTENCY_FINGERPRINT_MISSMATCH: 422,
  REQUEST_IN_PROGRESS: 409,
};
async function peerMiddleware(req: Request, res: Response, next: NextFunction): Promise<void> {
  const request = {
    headers: req.headers,
    body: req.body as Record<string, unknown>,
    path: req.path,
    method: req.method,
  };
  try {
    const cached = await idempotency.onRequest<unknown, unknown>(request);
    if (cached !== undefined) {
      const status = (cached.additional?.statusCode as number | undefined) ?? 200;
      res.status(status).set('idempotent-replayed', 'true').json(cached.body);
      return;
    }
  } catch (error) {
    if (error instanceof IdempotencyError) {
      res.status(peerStatus[error.code] ?? 400).json({ title: error.message });
      return;
    }
    next(error);
    return;
  }
  const json = res.json.bind(res);
  res.json = (payload: unknown) => {
    idempotency
      .onResponse(request, { body: payload, additional: { statusCode: res.statusCode } })
      .then(() => json(payload), next);
    return res;
  };
  next();
}

const app = express();
app.disable('x-powered-by');
app.use(express.json({ verify: keepRawBody }));
// The store as the README recommends for a server with many requests in flight.
const grouped = new SqliteGroupCommitStore(store);
const layer = expressIdempotency(grouped, { scope: 'global', ttlSeconds: 3600 });

// The middleware's two writes and nothing else of it: the key claimed with a lease, the answer
// stored under the claim's token once the route has answered, then sent. What the layer's
// statements and commits cost a request, apart from its JavaScript.
async function storeCalls(req: Request, res: Response, next: NextFunction): Promise<void> {
  const key = req.get('idempotency-key') ?? '';
  const now = Date.now() / 1000;
  const claim = await grouped.acquire(key, 'fingerprint', {
    expires: now + 3600,
    now,
    leaseSeconds: 60,
  });
  if (claim.status !== 'acquired') {
    res.status(409).end();
    return;
  }
  const json = res.json.bind(res);
  res.json = (payload: unknown) => {
    const answer = { status: res.statusCode, body: JSON.stringify(payload) };
    grouped.finish(key, 'fingerprint', answer, claim.fencingToken).then((stored) => {
      if (stored) json(payload);
      else next(new Error('the answer was not stored'));
    }, next);
    return res;
  };
  next();
}

app.post('/payments', validate, layer, pay);
app.post('/plain/payments', validate, pay);
app.post('/store/payments', validate, storeCalls, pay);
app.post(
  '/transactional/payments',
  validate,
  expressTransaction(
    sqliteTransaction(store),
    (req) => {
      const payment = insertFrom(req);
      return { status: 201, headers: { location: `/payments/${payment.id}` }, body: payment };
    },
    { scope: 'global', ttlSeconds: 3600 },
  ),
);
app.post('/peer/payments', validate, peerMiddleware, pay);
// The server's own CPU time so far, read by the benchmark before and after each load run.
app.get('/cpu', (_req, res) => {
  res.json(process.cpuUsage());
});
const server = app.listen(0, '127.0.0.1', () => {
  process.stdout.write(`${(server.address() as AddressInfo).port}\n`);
});
process.on('SIGTERM', () => {
  server.close(() => {
    store.close();
    storage.disconnect().finally(() => process.exit(0));
  });
});
