// The application's own Drizzle schema. The idempotency keys table is re-exported from the
// library, so drizzle-kit generates it in the application's migrations beside its own tables.
// In an application: `export { keys } from 'drizzle-idempotency/pg';`
import { integer, pgTable, text, timestamp } from 'drizzle-orm/pg-core';

export { keys } from '../../src/pg/schema.js';

/** The orders the API creates: one row per order actually placed. */
export const orders = pgTable('orders', {
  id: text('id').primaryKey(),
  item: text('item').notNull(),
  quantity: integer('quantity').notNull(),
  createdAt: timestamp('created_at', { withTimezone: true }).notNull().defaultNow(),
});
