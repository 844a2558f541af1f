import { double, bigint as mysqlBigint, mysqlTable, varchar } from 'drizzle-orm/mysql-core';
import { doublePrecision, bigint as pgBigint, pgTable, text as pgText } from 'drizzle-orm/pg-core';
import { integer, real, sqliteTable, text } from 'drizzle-orm/sqlite-core';

/** Every payment the service actually executed, in the same SQLite file as the keys. */
export const payments = sqliteTable('payments', {
  id: text('id').primaryKey(),
  amount: integer('amount').notNull(),
  currency: text('currency').notNull(),
  createdAt: real('created_at').notNull(),
});

/** The same table on PostgreSQL, in the database the keys are kept in. */
export const pgPayments = pgTable('payments', {
  id: pgText('id').primaryKey(),
  amount: pgBigint('amount', { mode: 'number' }).notNull(),
  currency: pgText('currency').notNull(),
  createdAt: doublePrecision('created_at').notNull(),
});

/** The same table on MySQL or MariaDB, in the database the keys are kept in. */
export const mysqlPayments = mysqlTable('payments', {
  id: varchar('id', { length: 64 }).primaryKey(),
  amount: mysqlBigint('amount', { mode: 'number' }).notNull(),
  currency: varchar('currency', { length: 3 }).notNull(),
  createdAt: double('created_at').notNull(),
});

/** A payment as the API returns it. */
export type Payment = typeof payments.$inferSelect;

/**
 * The outbox: one receipt per payment, naming the provider's charge, written in the same
 * transaction as its step's record; a mailer would send and delete them.
 */
export const receipts = sqliteTable('receipts', {
  paymentId: text('payment_id').primaryKey(),
  chargeId: text('charge_id').notNull(),
});

/** The same outbox on PostgreSQL. */
export const pgReceipts = pgTable('receipts', {
  paymentId: pgText('payment_id').primaryKey(),
  chargeId: pgText('charge_id').notNull(),
});

/** The same outbox on MySQL or MariaDB. */
export const mysqlReceipts = mysqlTable('receipts', {
  paymentId: varchar('payment_id', { length: 64 }).primaryKey(),
  chargeId: varchar('charge_id', { length: 64 }).notNull(),
});
