import { sql } from 'drizzle-orm';
import { index, integer, real, sqliteTable, text } from 'drizzle-orm/sqlite-core';
import type { KeyStatus } from '../core/status.js';
import {
  assertTableName,
  DEFAULT_TABLE_NAME,
  doneIdIndexName,
  retentionIndexName,
} from '../core/table-name.js';

/**
 * Builds the keys table on SQLite under `name`: exactly the columns of the contract plus the lease columns, and the
 * retention index on `(status, expires, id)`, named after the table (`<name>_status_expires_id_idx`)
 * so two tables never clash. Export it from your drizzle-kit schema if you keep your own
 * migrations, and give it to the store as `{ table }`.
 *
 * The index covers retention: `status = 'done' AND expires <= now` is one range scan of it, and
 * walking it in order lets a sweep delete a backlog in linear time.
 *
 * @param name - the table's name: letters, digits and underscores, at most 38; default `keys`
 * @throws {@link InvalidOptionError} for a name the library cannot use
 * @example
 * ```ts
 * import { sqliteKeysTable } from 'drizzle-idempotency/sqlite';
 * export const idempotencyKeys = sqliteKeysTable('idempotency_keys');
 * ```
 */
export function sqliteKeysTable<const N extends string = typeof DEFAULT_TABLE_NAME>(
  name: N = DEFAULT_TABLE_NAME as N,
) {
  assertTableName(name);
  return sqliteTable(name, sqliteKeysColumns(), (table) => [
    index(retentionIndexName(name)).on(table.status, table.expires, table.id),
    // Done rows in id order, with their deadlines: a purge of a large backlog walks it from the
    // lowest id and stops at its limit, instead of sorting the whole backlog. Partial, so a
    // reserve (a pending row) never writes to it.
    index(doneIdIndexName(name)).on(table.id, table.expires).where(sql`status = 'done'`),
  ]);
}

/** The columns of the keys table on SQLite, shared by {@link sqliteKeysTable} and the push tables. */
export function sqliteKeysColumns() {
  return {
    id: text('id').primaryKey(),
    fingerprint: text('fingerprint').notNull(),
    status: text('status').$type<KeyStatus>().notNull(),
    response: text('response'),
    expires: real('expires').notNull(),
    // The lease of a pending owner (see LeasedIdempotencyStore): NULL for rows without one.
    leaseUntil: real('lease_until'),
    // The fencing token of the row's ownership (see nextFencingToken); a takeover raises it.
    // INTEGER is 64-bit in SQLite, wide enough for tokens of 2^52 and up.
    attempt: integer('attempt').notNull().default(1),
    unrecorded: integer('unrecorded', { mode: 'boolean' }).notNull().default(false),
    // The recorded steps of the key's handler (see docs/steps.md): a JSON object of step name to
    // stored result, NULL until the first step. Kept in the key's row so it goes with the key.
    steps: text('steps'),
  };
}

/** A keys table built by {@link sqliteKeysTable}, whatever its name. */
export type SqliteKeysTable = ReturnType<typeof sqliteKeysTable<string>>;

/**
 * The default keys table, named `keys`. Import it into your own drizzle-kit schema if you keep
 * your own migrations.
 *
 * @example
 * ```ts
 * import { keys } from 'drizzle-idempotency/sqlite';
 * const pending = db.select().from(keys).where(eq(keys.status, 'pending')).all();
 * ```
 */
export const keys = sqliteKeysTable();
