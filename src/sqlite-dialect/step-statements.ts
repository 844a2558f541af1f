import type { AnySqliteDatabase } from '../core/drizzle-types.js';
import { leaseHolderRow, ownerRow } from '../core/key-conditions.js';
import type { SynchronousStepStatements } from '../core/step-recorders.js';
import type { SqliteKeysTable } from './schema.js';

/**
 * The step log's read and fenced write of a key's row through a drizzle SQLite database that runs
 * statements synchronously (bun:sqlite, a Durable Object's storage), for
 * {@link SynchronousStepStatements}.
 *
 * @param db - the store's database
 * @param table - the store's keys table
 */
export function drizzleSqliteStepStatements<TX extends Pick<AnySqliteDatabase, 'update'>>(
  db: AnySqliteDatabase,
  table: SqliteKeysTable,
): Pick<SynchronousStepStatements<TX>, 'read' | 'record'> {
  return {
    read: (key, digest) =>
      db
        .select({ steps: table.steps })
        .from(table)
        .where(ownerRow(table, key, digest))
        .get()?.steps ?? null,
    // RETURNING says whether the row changed: a Durable Object's run() answers nothing, and it
    // counts the changed row the same on every bun:sqlite version.
    record: (owner, stored, tx) =>
      (tx ?? db)
        .update(table)
        .set({ steps: stored })
        .where(leaseHolderRow(table, owner.key, owner.fingerprint, owner.fencingToken))
        .returning({ id: table.id })
        .all().length === 1,
  };
}
