import { sql } from 'drizzle-orm';
import { index, real, sqliteTable, text } from 'drizzle-orm/sqlite-core';
import type { KeyStatus } from '../core/status.js';

/** The partial index of done rows in id order that a purge of a large backlog walks. */
export const DONE_ID_INDEX = 'keys_done_id_expires_idx';

/**
 * The `keys` table on SQLite, exactly the five columns of the contract. Import it into your own
 * drizzle-kit schema if you keep your own migrations.
 *
 * The index on `(status, expires, id)` covers retention: `status = 'done' AND expires <= now`
 * is one range scan of it, and walking it in order lets a sweep delete a backlog in linear time.
 *
 * @example
 * ```ts
 * import { keys } from 'drizzle-idempotency/sqlite';
 * const pending = db.select().from(keys).where(eq(keys.status, 'pending')).all();
 * ```
 */
export const keys = sqliteTable(
  'keys',
  {
    id: text('id').primaryKey(),
    fingerprint: text('fingerprint').notNull(),
    status: text('status').$type<KeyStatus>().notNull(),
    response: text('response'),
    expires: real('expires').notNull(),
  },
  (table) => [
    index('keys_status_expires_id_idx').on(table.status, table.expires, table.id),
    // Done rows in id order, with their deadlines: a purge of a large backlog walks it from the
    // lowest id and stops at its limit, instead of sorting the whole backlog. Partial, so a
    // reserve (a pending row) never writes to it.
    index(DONE_ID_INDEX).on(table.id, table.expires).where(sql`status = 'done'`),
  ],
);
