import { createPaymentsApp } from '../../examples/payments/app.js';
import { sqlitePayments } from '../../examples/payments/backend.js';
import { openSqliteStore, type SqliteIdempotencyStore } from '../../src/sqlite/index.js';
import { listening } from './http-servers.js';
import { freshDbPath } from './temp.js';

/** The payments example on a fresh SQLite file in `dir`, listening on 127.0.0.1. */
export interface PaymentsService {
  readonly url: string;
  readonly store: SqliteIdempotencyStore<unknown>;
  /** Ends open connections, closes the server, then the store. */
  close(): Promise<void>;
}

/** Starts the payments example as its `main` does, with a 60 s answer TTL on the real clock. */
export async function startPaymentsService(dir: string): Promise<PaymentsService> {
  const store = openSqliteStore(freshDbPath(dir));
  const app = createPaymentsApp(sqlitePayments(store), {
    ttlSeconds: 60,
    now: () => Date.now() / 1000,
  });
  const server = await listening(app.listen(0, '127.0.0.1'));
  return {
    url: server.url,
    store,
    close: async () => {
      await server.close();
      store.close();
    },
  };
}
