import { asc, eq, sql } from 'drizzle-orm';
import type { Request, RequestHandler, Response } from 'express';
import type { StepLog } from '../../src/core/steps.js';
import type { LeasedIdempotencyStore } from '../../src/core/store.js';
import {
  type ExpressIdempotencyOptions,
  expressIdempotency,
  idempotencyStep,
} from '../../src/http/express.js';
import { type MysqlIdempotencyStore, mysqlSteps, openMysqlStore } from '../../src/mysql/index.js';
import { openPgStore, type PgIdempotencyStore, pgSteps } from '../../src/pg/index.js';
import {
  openSqliteStore,
  type SqliteIdempotencyStore,
  sqliteSteps,
} from '../../src/sqlite/index.js';
import {
  mysqlPayments,
  mysqlReceipts,
  type Payment,
  payments,
  pgPayments,
  pgReceipts,
  receipts,
} from './schema.js';

/** How `POST /payments` makes a payment, whatever the database. */
interface PaymentRoute {
  /** Builds the payment from the validated request, once its key is claimed. */
  readonly create: (req: Request) => Payment;
  /** Slow processing after the key is claimed (duplicates get 409 meanwhile), before any step. */
  readonly prepare: (req: Request) => Promise<void>;
  /** Charges the payment through the provider with the step's derived key; answers the charge id. */
  readonly charge: (payment: Payment, idempotencyKey: string) => Promise<string>;
  /** Runs right after the payment row is written, before its step's transaction commits. */
  readonly afterWrite: () => void;
  /** The key of the steps' derived keys: the same in every process, kept secret. */
  readonly secret: string;
  /** The idempotency layer's options (scope, retention, clock, lease). */
  readonly options: ExpressIdempotencyOptions;
}

/** What a database writes in the payment's transactional steps. */
interface PaymentWrites<TX> {
  /** The ledger: the payment row. */
  ledger(tx: TX, payment: Payment): void | Promise<void>;
  /** The outbox: the receipt naming the charge. */
  receipt(tx: TX, payment: Payment, charge: string): void | Promise<void>;
}

/** The database the payments service keeps its keys and its payments in. */
export interface PaymentsBackend {
  /** The store of the idempotency keys. */
  readonly store: LeasedIdempotencyStore<unknown>;
  /** Where the data lives, for the log: a file, or a server URL without its credentials. */
  readonly location: string;
  /**
   * The handler of `POST /payments`, in steps recorded under the key (see `steppedPayment`): the
   * charge, the payment row, the receipt.
   */
  postPayment(route: PaymentRoute): RequestHandler;
  /** Every payment executed, oldest first. */
  listPayments(): Promise<Payment[]>;
  /** The payment with this id (what the `Location` of a 201 names), or `undefined`. */
  getPayment(id: string): Promise<Payment | undefined>;
  /** Closes the store and its connections. */
  close(): Promise<void>;
}

/**
 * `POST /payments` in steps, each recorded under the request's key: the payment fixed once (its id
 * and time), the charge through the provider with the step's derived key, the payment row in one
 * transaction with its record, the receipt in another. A request that crashes between two steps
 * leaves its key to the client's retry, which goes on from the last recorded step: the provider
 * sees the same derived key, the ledger and the outbox are written once. The returned handler
 * settles once the response closed, so a graceful stop waits for the whole exchange.
 */
function steppedPayment<TX>(
  store: LeasedIdempotencyStore<unknown>,
  steps: StepLog<TX>,
  route: PaymentRoute,
  writes: PaymentWrites<TX>,
): RequestHandler {
  const idempotency = expressIdempotency(store, { ...route.options, steps });
  const pay = async (req: Request, res: Response) => {
    await route.prepare(req);
    const step = idempotencyStep<TX>(req);
    const payment = await step('payment', () => route.create(req));
    const charge = await step('charge', ({ key }) => route.charge(payment, key));
    // Synchronous where the database's transaction must be (better-sqlite3).
    await step.tx('ledger', (tx) => {
      const written = writes.ledger(tx, payment);
      return written instanceof Promise ? written.then(route.afterWrite) : route.afterWrite();
    });
    await step.tx('receipt', (tx) => writes.receipt(tx, payment, charge));
    res.status(201).location(`/payments/${payment.id}`).json(payment);
  };
  return (req, res, next) =>
    new Promise<void>((resolve) => {
      // The layer ends the response last, once it recorded the answer or let go of the key (even
      // when the connection is already gone): the request's work is over then, not at the
      // connection's close, so a graceful stop closes the store only after it.
      const end = res.end;
      res.end = function endThenSettle(this: Response, ...args: unknown[]): Response {
        res.end = end;
        (end as (this: Response, ...rest: unknown[]) => Response).apply(this, args);
        resolve();
        return this;
      } as Response['end'];
      idempotency(req, res, (error?: unknown) => {
        if (error !== undefined) next(error);
        else pay(req, res).catch(next);
      });
    });
}

/**
 * The payments service on SQLite: the `payments` table in the store's own file, written in the
 * key's transaction (synchronous, as better-sqlite3 transactions must be).
 */
export function sqlitePayments(
  store: SqliteIdempotencyStore<unknown>,
  location = 'SQLite',
): PaymentsBackend {
  const { db } = store;
  db.run(sql`CREATE TABLE IF NOT EXISTS payments (
    id TEXT PRIMARY KEY,
    amount INTEGER NOT NULL,
    currency TEXT NOT NULL,
    created_at REAL NOT NULL
  )`);
  db.run(sql`CREATE TABLE IF NOT EXISTS receipts (
    payment_id TEXT PRIMARY KEY,
    charge_id TEXT NOT NULL
  )`);
  return {
    store,
    location,
    postPayment: (route) =>
      steppedPayment(store, sqliteSteps(store, { secret: route.secret }), route, {
        ledger: (tx, payment) => {
          tx.insert(payments).values(payment).run();
        },
        receipt: (tx, payment, chargeId) => {
          tx.insert(receipts).values({ paymentId: payment.id, chargeId }).run();
        },
      }),
    listPayments: async () =>
      db.select().from(payments).orderBy(asc(payments.createdAt), asc(payments.id)).all(),
    getPayment: async (id) => db.select().from(payments).where(eq(payments.id, id)).get(),
    close: async () => store.close(),
  };
}

/** The payments service on PostgreSQL: the `payments` table next to `keys`, one transaction for both. */
async function pgPaymentsBackend(
  store: PgIdempotencyStore<unknown>,
  location = 'PostgreSQL',
): Promise<PaymentsBackend> {
  const { db } = store;
  await db.execute(sql`CREATE TABLE IF NOT EXISTS payments (
    id text PRIMARY KEY,
    amount bigint NOT NULL,
    currency text NOT NULL,
    created_at double precision NOT NULL
  )`);
  await db.execute(sql`CREATE TABLE IF NOT EXISTS receipts (
    payment_id text PRIMARY KEY,
    charge_id text NOT NULL
  )`);
  return {
    store,
    location,
    postPayment: (route) =>
      steppedPayment(store, pgSteps(store, { secret: route.secret }), route, {
        ledger: async (tx, payment) => {
          await tx.insert(pgPayments).values(payment);
        },
        receipt: async (tx, payment, chargeId) => {
          await tx.insert(pgReceipts).values({ paymentId: payment.id, chargeId });
        },
      }),
    listPayments: () =>
      db.select().from(pgPayments).orderBy(asc(pgPayments.createdAt), asc(pgPayments.id)),
    getPayment: async (id) => (await db.select().from(pgPayments).where(eq(pgPayments.id, id)))[0],
    close: () => store.close(),
  };
}

/** The payments service on MySQL or MariaDB: the `payments` table next to `keys`, one transaction for both. */
async function mysqlPaymentsBackend(
  store: MysqlIdempotencyStore<unknown>,
  location = 'MySQL',
): Promise<PaymentsBackend> {
  const { db } = store;
  await db.execute(sql`CREATE TABLE IF NOT EXISTS payments (
    id varchar(64) NOT NULL PRIMARY KEY,
    amount bigint NOT NULL,
    currency varchar(3) NOT NULL,
    created_at double NOT NULL
  ) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4`);
  await db.execute(sql`CREATE TABLE IF NOT EXISTS receipts (
    payment_id varchar(64) NOT NULL PRIMARY KEY,
    charge_id varchar(64) NOT NULL
  ) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4`);
  return {
    store,
    location,
    postPayment: (route) =>
      steppedPayment(store, mysqlSteps(store, { secret: route.secret }), route, {
        ledger: async (tx, payment) => {
          await tx.insert(mysqlPayments).values(payment);
        },
        receipt: async (tx, payment, chargeId) => {
          await tx.insert(mysqlReceipts).values({ paymentId: payment.id, chargeId });
        },
      }),
    listPayments: () =>
      db.select().from(mysqlPayments).orderBy(asc(mysqlPayments.createdAt), asc(mysqlPayments.id)),
    getPayment: async (id) =>
      (await db.select().from(mysqlPayments).where(eq(mysqlPayments.id, id)))[0],
    close: () => store.close(),
  };
}

// The server and database a URL names, without the user and password, for the log.
function withoutCredentials(url: URL): string {
  return `${url.protocol}//${url.host}${url.pathname}`;
}

/**
 * Opens the database the environment names: the server `IDEM_URL` points at (`postgres://`,
 * `postgresql://` or `mysql://`), else the SQLite file `IDEM_DB` (default `./idempotency.db`).
 * The store's migrations and the `payments` table are applied idempotently.
 */
export async function openPaymentsBackend(env: NodeJS.ProcessEnv): Promise<PaymentsBackend> {
  const url = env.IDEM_URL;
  if (url === undefined || url === '') {
    const path = env.IDEM_DB || './idempotency.db';
    return sqlitePayments(openSqliteStore(path), path);
  }
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw new Error('IDEM_URL must be a postgres://, postgresql:// or mysql:// URL');
  }
  const location = withoutCredentials(parsed);
  switch (parsed.protocol) {
    case 'postgres:':
    case 'postgresql:':
      return pgPaymentsBackend(await openPgStore(url), location);
    case 'mysql:':
      return mysqlPaymentsBackend(await openMysqlStore(url), location);
    default:
      throw new Error('IDEM_URL must be a postgres://, postgresql:// or mysql:// URL');
  }
}
