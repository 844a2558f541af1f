// Express + PostgreSQL, end to end: the application's own Drizzle schema re-exports the keys
// table, its drizzle-kit migrations create it, the built-in sweeper keeps retention running, and
// SIGTERM drains the server before the store closes. Run it with
//   DATABASE_URL=postgres://… npx tsx examples/express-pg/main.ts
// Configuration from the environment:
//   DATABASE_URL                  the PostgreSQL database (required)
//   PORT                          the port on 127.0.0.1 (default 3000; 0 picks a free one)
//   IDEM_TTL_SECONDS              how long answers are replayed (default 72 h, a weekend of retries)
//   IDEM_SWEEP_INTERVAL_SECONDS   how often the sweeper deletes expired answers (default 300)
import { randomUUID } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import { fileURLToPath } from 'node:url';
import { drizzle } from 'drizzle-orm/node-postgres';
import { migrate } from 'drizzle-orm/node-postgres/migrator';
import express from 'express';
import pg from 'pg';
import { expressIdempotency, keepRawBody } from '../../src/http/express.js';
import { openPgStore } from '../../src/pg/index.js';
import { startSweeper } from '../../src/sweeper.js';
import { orders } from './schema.js';

function positiveNumber(name: string, fallback: number): number {
  const raw = process.env[name];
  if (raw === undefined || raw === '') return fallback;
  const value = Number(raw);
  if (!Number.isFinite(value) || value < 0) throw new Error(`${name} must be a number >= 0`);
  return value;
}

const url = process.env.DATABASE_URL;
if (url === undefined || url === '') {
  process.stderr.write(
    'set DATABASE_URL to a PostgreSQL database, e.g. postgres://localhost/app\n',
  );
  process.exit(2);
}

const pool = new pg.Pool({ connectionString: url });
// A connection broken while idle is dropped by the pool; the next query opens a new one.
pool.on('error', () => undefined);
const db = drizzle({ client: pool });

// The application's migrations (its own journal, `__drizzle_migrations`) create `orders` and the
// keys table. The store then adopts that table: its columns are checked, and the library's own
// journal records it, so later versions of the library know what is there.
await migrate(db, {
  migrationsFolder: fileURLToPath(new URL('./drizzle', import.meta.url)),
});
const store = await openPgStore(pool);
// Retention without a cron job: every instance may run it, one sweeps at a time.
const sweeper = startSweeper(store, {
  intervalSeconds: positiveNumber('IDEM_SWEEP_INTERVAL_SECONDS', 300),
  onSweep: (result) => {
    if (result.deleted > 0) process.stdout.write(`swept ${result.deleted} expired key(s)\n`);
  },
  onError: (error) => process.stderr.write(`sweep failed: ${(error as Error).message}\n`),
});

const app = express();
app.post(
  '/orders',
  // keepRawBody: the request is fingerprinted as the client sent it.
  express.json({ verify: keepRawBody }),
  expressIdempotency(store, {
    // Every client shares one space of keys here: the example has no authentication. An API with
    // callers passes a function naming the caller its authentication established instead.
    scope: 'global',
    ttlSeconds: positiveNumber('IDEM_TTL_SECONDS', 72 * 3600),
  }),
  async (req, res) => {
    const { item, quantity } = req.body as { item?: unknown; quantity?: unknown };
    if (typeof item !== 'string' || !Number.isInteger(quantity)) {
      res.status(400).json({ error: 'item (a string) and quantity (an integer) are required' });
      return;
    }
    const [order] = await db
      .insert(orders)
      .values({ id: randomUUID(), item, quantity: quantity as number })
      .returning();
    res.status(201).json(order);
  },
);

const server = app.listen(Number(process.env.PORT ?? 3000), '127.0.0.1', () => {
  const { port } = server.address() as AddressInfo;
  process.stdout.write(`listening on http://127.0.0.1:${port}\n`);
});

// Graceful stop: no new connections, the requests in flight finish (their answers recorded),
// the sweeper ends its batch, then the store and the pool close.
let stopping = false;
async function shutdown(): Promise<void> {
  if (stopping) return;
  stopping = true;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  await sweeper.stop();
  await store.close();
  await pool.end();
  process.stdout.write('stopped\n');
}
process.on('SIGTERM', () => void shutdown());
process.on('SIGINT', () => void shutdown());
