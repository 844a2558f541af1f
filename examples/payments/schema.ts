import { integer, real, sqliteTable, text } from 'drizzle-orm/sqlite-core';

/** Every payment the service actually executed, in the same SQLite file as the keys. */
export const payments = sqliteTable('payments', {
  id: text('id').primaryKey(),
  amount: integer('amount').notNull(),
  currency: text('currency').notNull(),
  createdAt: real('created_at').notNull(),
});

/** A payment as the API returns it. */
export type Payment = typeof payments.$inferSelect;
