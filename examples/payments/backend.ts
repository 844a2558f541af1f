import { asc, eq, sql } from 'drizzle-orm';
import type { Request, RequestHandler } from 'express';
import type { LeasedIdempotencyStore } from '../../src/core/store.js';
import { type ExpressTransactionOptions, expressTransaction } from '../../src/http/express.js';
import type { HttpResponse } from '../../src/http/index.js';
import {
  type MysqlIdempotencyStore,
  mysqlTransaction,
  openMysqlStore,
} from '../../src/mysql/index.js';
import { openPgStore, type PgIdempotencyStore, pgTransaction } from '../../src/pg/index.js';
import {
  openSqliteStore,
  type SqliteIdempotencyStore,
  sqliteTransaction,
} from '../../src/sqlite/index.js';
import { mysqlPayments, type Payment, payments, pgPayments } from './schema.js';

/** How `POST /payments` makes a payment, whatever the database. */
interface PaymentRoute {
  /** Builds the payment from the validated request, once its key is claimed. */
  readonly create: (req: Request) => Payment;
  /** Runs right after the payment row is written, before its answer is recorded. */
  readonly afterWrite: () => void;
  /** The idempotency layer's options (retention, clock, lease, the slow `prepare` step). */
  readonly options: ExpressTransactionOptions<void>;
}

/** The database the payments service keeps its keys and its payments in. */
export interface PaymentsBackend {
  /** The store of the idempotency keys. */
  readonly store: LeasedIdempotencyStore<unknown>;
  /** Where the data lives, for the log: a file, or a server URL without its credentials. */
  readonly location: string;
  /**
   * The handler of `POST /payments`: the payment row and its stored answer commit in one
   * transaction, fenced by the key's attempt token.
   */
  postPayment(route: PaymentRoute): RequestHandler;
  /** Every payment executed, oldest first. */
  listPayments(): Promise<Payment[]>;
  /** The payment with this id (what the `Location` of a 201 names), or `undefined`. */
  getPayment(id: string): Promise<Payment | undefined>;
  /** Closes the store and its connections. */
  close(): Promise<void>;
}

function created(payment: Payment): HttpResponse {
  return { status: 201, headers: { location: `/payments/${payment.id}` }, body: payment };
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
  return {
    store,
    location,
    postPayment: ({ create, afterWrite, options }) =>
      expressTransaction(
        sqliteTransaction(store),
        (req, tx) => {
          const payment = create(req);
          tx.insert(payments).values(payment).run();
          afterWrite();
          return created(payment);
        },
        options,
      ),
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
  return {
    store,
    location,
    postPayment: ({ create, afterWrite, options }) =>
      expressTransaction(
        pgTransaction(store),
        async (req, tx) => {
          const payment = create(req);
          await tx.insert(pgPayments).values(payment);
          afterWrite();
          return created(payment);
        },
        options,
      ),
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
  return {
    store,
    location,
    postPayment: ({ create, afterWrite, options }) =>
      expressTransaction(
        mysqlTransaction(store),
        async (req, tx) => {
          const payment = create(req);
          await tx.insert(mysqlPayments).values(payment);
          afterWrite();
          return created(payment);
        },
        options,
      ),
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
