// What docs/development.md's prelude names, made real, so every snippet runs and not only
// typechecks: the request at hand, the application's clock and handler, its `orders` table and
// the store a page opened earlier, all on a fresh SQLite file in the snippet's own folder.
import { sql } from 'drizzle-orm';
import { integer, sqliteTable, text } from 'drizzle-orm/sqlite-core';
import { openSqliteStore } from '../../src/sqlite/index.js';

const orders = sqliteTable('orders', {
  id: integer('id').primaryKey(),
  item: text('item').notNull(),
});

const store = openSqliteStore<{ receipt: number }>('./prelude-store.db');
store.db.run(sql`CREATE TABLE IF NOT EXISTS orders (id INTEGER PRIMARY KEY, item TEXT NOT NULL)`);
let receipts = 0;
const now = Date.now() / 1000;

Object.assign(globalThis, {
  key: 'order-42',
  fingerprint: 'fingerprint-of-order-42',
  now,
  expires: now + 24 * 3600,
  charge: () => {
    receipts += 1;
    return receipts;
  },
  // The snippets' apps have no authentication: every request is one client's.
  clientIdOf: () => 'client-7',
  createPayment: (body: unknown) => ({ id: `pay_${receipts}`, body }),
  store,
  schema: { orders },
  orders,
  order: { item: 'book' },
});
