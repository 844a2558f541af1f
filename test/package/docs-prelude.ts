// The names documentation snippets may use without declaring them (listed in
// docs/development.md). A snippet shows one step of an application; these stand for the rest of
// it: the request at hand, the application's clock, its handler, its own tables, the store a page
// opened earlier. Only their types matter: the prelude is compiled with the snippets, never run.
import { integer, sqliteTable, text } from 'drizzle-orm/sqlite-core';
import type { SqliteIdempotencyStore } from '../../src/sqlite/index.js';

const ordersTable = sqliteTable('orders', {
  id: integer('id').primaryKey(),
  item: text('item').notNull(),
});

declare global {
  /** The answer the snippets' stores keep. */
  interface Receipt {
    receipt: number;
  }
  /** The idempotency key of the request at hand. */
  const key: string;
  /** The fingerprint of the request's payload. */
  const fingerprint: string;
  /** The retention deadline of the request at hand, in seconds on the application's clock. */
  const expires: number;
  /** The current time in seconds on the application's clock. */
  const now: number;
  /** The side effect made once per key: charges the card and returns the receipt number. */
  function charge(): number;
  /** The caller of a request, as the application's authentication established it. */
  function clientIdOf(request: unknown): string;
  /** The application's handler behind a route. */
  function createPayment(body: unknown): { id: string };
  /** A store a page opened in an earlier snippet. */
  const store: SqliteIdempotencyStore<Receipt>;
  /** The application's own drizzle schema, one of its tables, and a row for it. */
  const schema: { orders: typeof ordersTable };
  const orders: typeof ordersTable;
  const order: typeof ordersTable.$inferInsert;
}
