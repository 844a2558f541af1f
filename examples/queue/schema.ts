import { integer, sqliteTable, text } from 'drizzle-orm/sqlite-core';

/**
 * The consumer's effect: one credit row per applied message. `message_id` is deliberately not
 * unique, so a message applied twice would show up as two rows instead of being hidden by a
 * constraint: exactly-once comes from the idempotency key, not from this table.
 */
export const credits = sqliteTable('credits', {
  seq: integer('seq').primaryKey({ autoIncrement: true }),
  messageId: text('message_id').notNull(),
  account: text('account').notNull(),
  amount: integer('amount').notNull(),
});

/** The DDL of {@link credits}, run once at start-up next to the keys table. */
export const CREATE_CREDITS = `CREATE TABLE IF NOT EXISTS credits (
  seq INTEGER PRIMARY KEY AUTOINCREMENT,
  message_id TEXT NOT NULL,
  account TEXT NOT NULL,
  amount INTEGER NOT NULL
)`;

/** A message of the example's queue: credit `amount` to `account`, once. */
export interface CreditMessage {
  /** The message id, the idempotency key: a publisher that retries sends the same id again. */
  readonly id: string;
  readonly account: string;
  readonly amount: number;
}
