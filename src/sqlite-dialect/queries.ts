import { and, asc, eq, gt, inArray, isNotNull, sql } from 'drizzle-orm';
import type { BaseSQLiteDatabase } from 'drizzle-orm/sqlite-core';
import {
  expiredAnswer,
  expiredAnswerReplacement,
  idStartsWith,
  leaseHolderRow,
  leaseTakeover,
  liveAnswer,
  ownerRow,
  releasablePending,
  stalePending,
  takeoverToken,
} from '../core/key-conditions.js';
import { KeyStatus } from '../core/status.js';
import { compileSqliteStatement } from './compile.js';
import type { SqliteKeysTable } from './schema.js';

/** Any drizzle SQLite database, synchronous or not: only its query builders are used. */
// biome-ignore lint/suspicious/noExplicitAny: only the builders are used, never the schema
export type AnySqliteBuilder = BaseSQLiteDatabase<'sync' | 'async', unknown, any>;

const p = sql.placeholder;

function compileQueries(db: AnySqliteBuilder, keys: SqliteKeysTable) {
  const isExpiredAnswer = expiredAnswer(keys, p('now'));
  const ownPending = ownerRow(keys, p('id'), p('fingerprint'));
  const ownedBy = leaseHolderRow(keys, p('id'), p('fingerprint'), p('attempt'));
  const isPending = eq(keys.status, KeyStatus.pending);
  const isDone = eq(keys.status, KeyStatus.done);
  const pendingRows = (where: ReturnType<typeof and>) =>
    db.select().from(keys).where(where).orderBy(asc(keys.id)).limit(p('limit'));
  const expiredIds = (order: ReturnType<typeof asc>[]) =>
    db
      .select({ id: keys.id })
      .from(keys)
      .where(isExpiredAnswer)
      .orderBy(...order)
      .limit(p('limit'));
  const pendingRow = {
    id: p('id'),
    fingerprint: p('fingerprint'),
    status: KeyStatus.pending,
    expires: p('expires'),
  };
  return {
    reserve: compileSqliteStatement(db.insert(keys).values(pendingRow).onConflictDoNothing(), [
      'id',
      'fingerprint',
      'expires',
    ]),
    // One statement: inserts a missing key with a fresh fencing token, or takes over a pending row
    // of the same fingerprint whose lease lapsed, raising its token; returns no row otherwise. A
    // row without a lease (NULL) never compares as lapsed.
    acquire: compileSqliteStatement(
      db
        .insert(keys)
        .values({ ...pendingRow, leaseUntil: p('leaseUntil'), attempt: p('token') })
        .onConflictDoUpdate({ target: keys.id, ...leaseTakeover(keys, p('now')) })
        .returning({ attempt: keys.attempt }),
      ['id', 'fingerprint', 'expires', 'leaseUntil', 'token', 'now'],
    ),
    // One statement: the expired answer of the key becomes this caller's pending row, its token
    // raised; a row already replaced (pending) or swept no longer matches.
    replaceExpired: compileSqliteStatement(
      db
        .update(keys)
        .set({
          ...expiredAnswerReplacement({
            fingerprint: p('fingerprint'),
            expires: p('expires'),
            leaseUntil: p('leaseUntil'),
          }),
          attempt: takeoverToken(keys, p('token')),
        })
        .where(and(eq(keys.id, p('id')), isExpiredAnswer))
        .returning({ attempt: keys.attempt }),
      ['id', 'fingerprint', 'expires', 'leaseUntil', 'token', 'now'],
    ),
    finish: compileSqliteStatement(
      db
        .update(keys)
        .set({ status: KeyStatus.done, response: sql<string>`${p('response')}` })
        .where(ownPending),
      ['id', 'fingerprint', 'response'],
    ),
    finishFenced: compileSqliteStatement(
      db
        .update(keys)
        .set({ status: KeyStatus.done, response: sql<string>`${p('response')}` })
        .where(ownerRow(keys, p('id'), p('fingerprint'), p('attempt'))),
      ['id', 'fingerprint', 'response', 'attempt'],
    ),
    renew: compileSqliteStatement(
      db
        .update(keys)
        .set({ leaseUntil: sql<number>`${p('leaseUntil')}` })
        .where(ownedBy),
      ['id', 'fingerprint', 'attempt', 'leaseUntil'],
    ),
    releaseFenced: compileSqliteStatement(db.delete(keys).where(ownedBy), [
      'id',
      'fingerprint',
      'attempt',
    ]),
    markUnrecorded: compileSqliteStatement(
      db
        .update(keys)
        .set({ unrecorded: true, leaseUntil: null })
        .where(ownerRow(keys, p('id'), p('fingerprint'), p('attempt'))),
      ['id', 'fingerprint', 'attempt'],
    ),
    pendingKeys: compileSqliteStatement(
      pendingRows(and(isPending, idStartsWith(keys, p('prefix')))),
      ['limit', 'prefix'],
    ),
    stalePendingKeys: compileSqliteStatement(
      pendingRows(and(isPending, idStartsWith(keys, p('prefix')), stalePending(keys, p('now')))),
      ['now', 'limit', 'prefix'],
    ),
    // The operator's release: whatever the lease and the attempt.
    releasePending: compileSqliteStatement(
      db
        .delete(keys)
        .where(releasablePending(keys, p('id'), p('fingerprint')))
        .returning({ id: keys.id }),
      ['id', 'fingerprint'],
    ),
    // The answer alone: every replay reads it, and each column more is one more value a driver
    // converts and puts in a row object.
    fetch: compileSqliteStatement(
      db
        .select({ response: keys.response })
        .from(keys)
        .where(liveAnswer(keys, p('id'), p('now'))),
      ['id', 'now'],
    ),
    get: compileSqliteStatement(
      db
        .select()
        .from(keys)
        .where(eq(keys.id, p('id'))),
      ['id'],
    ),
    release: compileSqliteStatement(db.delete(keys).where(ownPending), ['id', 'fingerprint']),
    expired: compileSqliteStatement(expiredIds([asc(keys.id)]), ['now', 'limit']),
    // The candidates are chosen and deleted by one statement, so nothing can change in between;
    // the predicate is still repeated on each deleted row, so only rows that are expired answers
    // at that moment go, and RETURNING reports what was deleted, not what was selected. The unary
    // `+` keeps SQLite looking each candidate up by primary key instead of scanning the retention
    // index for the repeated predicate.
    purge: compileSqliteStatement(
      db
        .delete(keys)
        .where(
          and(
            inArray(keys.id, expiredIds([asc(keys.id)])),
            sql`+${keys.status} = ${KeyStatus.done}`,
            sql`+${keys.expires} <= ${p('now')}`,
          ),
        )
        .returning({ id: keys.id }),
      ['now', 'limit'],
    ),
    // ORDER BY (expires, id) follows the (status, expires, id) index, so SQLite walks it from the
    // start of the range without sorting the backlog: each batch costs O(batchSize).
    sweepBatch: compileSqliteStatement(
      db.delete(keys).where(inArray(keys.id, expiredIds([asc(keys.expires), asc(keys.id)]))),
      ['now', 'limit'],
    ),
    // A scope's answers, lowest ids first, chosen and deleted by one statement; the condition is
    // repeated on each deleted row, so a row that became pending in between stays.
    eraseBatch: compileSqliteStatement(
      db
        .delete(keys)
        .where(
          and(
            inArray(
              keys.id,
              db
                .select({ id: keys.id })
                .from(keys)
                .where(and(isDone, idStartsWith(keys, p('prefix'))))
                .orderBy(asc(keys.id))
                .limit(p('limit')),
            ),
            isDone,
          ),
        )
        .returning({ id: keys.id }),
      ['prefix', 'limit'],
    ),
    answers: compileSqliteStatement(
      db
        .select({ id: keys.id, response: keys.response })
        .from(keys)
        .where(and(isDone, gt(keys.id, p('after'))))
        .orderBy(asc(keys.id))
        .limit(p('limit')),
      ['after', 'limit'],
    ),
    reseal: compileSqliteStatement(
      db
        .update(keys)
        .set({ response: sql<string>`${p('response')}` })
        .where(and(eq(keys.id, p('id')), isDone, eq(keys.response, p('previous')))),
      ['id', 'previous', 'response'],
    ),
    stepRecords: compileSqliteStatement(
      db
        .select({ id: keys.id, steps: keys.steps })
        .from(keys)
        .where(and(isNotNull(keys.steps), gt(keys.id, p('after'))))
        .orderBy(asc(keys.id))
        .limit(p('limit')),
      ['after', 'limit'],
    ),
    resealSteps: compileSqliteStatement(
      db
        .update(keys)
        .set({ steps: sql<string>`${p('steps')}` })
        .where(and(eq(keys.id, p('id')), eq(keys.steps, p('previous')))),
      ['id', 'previous', 'steps'],
    ),
    counts: compileSqliteStatement(
      db
        .select({ status: keys.status, count: sql<number>`count(*)`.as('count') })
        .from(keys)
        .groupBy(keys.status),
      [],
    ),
    stats: compileSqliteStatement(
      db
        .select({
          status: keys.status,
          count: sql<number>`count(*)`.as('count'),
          past: sql<number>`count(*) filter (where ${keys.expires} <= ${p('now')})`.as('past'),
          lapsed:
            sql<number>`count(*) filter (where ${keys.unrecorded} = 0 and ${keys.leaseUntil} <= ${p('now')})`.as(
              'lapsed',
            ),
          unrecorded: sql<number>`count(*) filter (where ${keys.unrecorded} = 1)`.as('unrecorded'),
        })
        .from(keys)
        .groupBy(keys.status),
      ['now'],
    ),
  };
}

/** The statements of every SQLite-family store, compiled to text once per table. */
export type SqliteQueries = ReturnType<typeof compileQueries>;

// drizzle writes the same SQL for every SQLite driver, and the text depends on the table alone: a
// store built per request (a Worker's) compiles nothing.
const compiled = new WeakMap<SqliteKeysTable, SqliteQueries>();

/**
 * The statements of the SQLite-family stores (better-sqlite3, libSQL, D1, bun:sqlite, …) over
 * `keys`, compiled by drizzle once per table and kept: every runtime runs the same text.
 *
 * @param db - any drizzle SQLite database; only its query builders are used
 * @param keys - the keys table
 */
export function sqliteQueries(db: AnySqliteBuilder, keys: SqliteKeysTable): SqliteQueries {
  let queries = compiled.get(keys);
  if (queries === undefined) {
    queries = compileQueries(db, keys);
    compiled.set(keys, queries);
  }
  return queries;
}
