import { inArray, or, type SQL, sql } from 'drizzle-orm';
import type { KeyStatements } from '../core/async-store.js';
import { liveAnswer, ownerRow } from '../core/key-conditions.js';
import type { AcquireStep } from '../core/key-store.js';
import type { KeyRow } from '../core/record.js';
import { type BatchItem, type BatchSizes, StatementBatch } from '../core/statement-batch.js';
import { KeyStatus } from '../core/status.js';
import type { AnyMysqlDatabase } from './client.js';
import { writeHeader } from './compile.js';
import { mysqlRefused, retryDeadlocks } from './errors.js';
import type { MysqlKeysTable } from './schema.js';

/** A row of the keys table as drizzle reads it, the lease column under its property name. */
interface MysqlKeyRow extends Omit<KeyRow, 'lease_until'> {
  readonly leaseUntil: number | null;
}

/**
 * The common row of a row drizzle read: the lease column named as the column, as every other
 * dialect's rows name it.
 *
 * @param row - a row of `select()` on the keys table, or `undefined`
 */
export function keyRowOf(row: MysqlKeyRow | undefined): KeyRow | undefined {
  return row && { ...row, lease_until: row.leaseUntil };
}

/** The lease one call of a batched claim writes, as the single-row insert takes it. */
interface BatchedLease {
  readonly fingerprint: string;
  readonly expires: number;
  readonly leaseUntil: number;
  readonly token: number;
}

/** One fenced finish of a batch. */
interface BatchedFinish {
  readonly fingerprint: string;
  readonly response: string;
  readonly attempt: number;
}

/**
 * The batched statements of a MySQL store: each takes the calls of a batch (of distinct keys, in
 * ascending key order) and does for every key exactly what the store's single-row statement does
 * for one, in one statement and at most one commit. MySQL has no `RETURNING` (nor MariaDB on an
 * UPDATE), so a statement's answer per key comes from what it is: an INSERT of many rows either
 * writes them all or, refused, none; a fenced UPDATE that changed every row it names has finished
 * every call, and otherwise its transaction reads which rows it changed while it still holds them.
 * The per-call values go in as parameters of a condition per key (`OR`) or a `CASE` on the key, so
 * the statements need nothing beyond what MySQL 8.0 and MariaDB 10.6 both have.
 *
 * @param db - the primary database the store's statements run on
 * @param keys - the keys table
 */
export function batchedMysqlStatements(db: AnyMysqlDatabase, keys: MysqlKeysTable) {
  return {
    // As `get`, for many keys: the rows found, as of one moment.
    gets: async (ids: readonly string[]): Promise<KeyRow[]> =>
      (
        await db
          .select()
          .from(keys)
          .where(inArray(keys.id, [...ids]))
      ).map((row) => keyRowOf(row) as KeyRow),
    // As `fetch`, for many keys, each at its own caller's `now`: the live answers found.
    fetches: (items: readonly BatchItem<number>[]) =>
      db
        .select({ id: keys.id, response: keys.response })
        .from(keys)
        .where(or(...items.map((item) => liveAnswer(keys, item.key, item.args)))),
    // As the insert that starts `acquire`, for many keys: one plain INSERT of every row (never
    // INSERT IGNORE, which would hide more than duplicates). An existing key fails it with
    // ER_DUP_ENTRY and nothing of it is written; each call then runs alone.
    inserts: (items: readonly BatchItem<BatchedLease>[]) =>
      retryDeadlocks(() =>
        db.insert(keys).values(
          items.map((item) => ({
            id: item.key,
            fingerprint: item.args.fingerprint,
            status: KeyStatus.pending,
            expires: item.args.expires,
            leaseUntil: item.args.leaseUntil,
            attempt: item.args.token,
          })),
        ),
      ),
    // As `finishFenced`, for many keys: 1 for each key finished, 0 for the others. One UPDATE,
    // each row under its own owner condition and given its own answer; when it changed fewer rows
    // than it names, its transaction reads the rows before committing, while the ones it finished
    // are still locked by it and show its answer under its token.
    finishes: (items: readonly BatchItem<BatchedFinish>[]) =>
      retryDeadlocks(() =>
        db.transaction(async (tx) => {
          const answers = sql.join(
            items.map((item) => sql`WHEN ${item.key} THEN ${item.args.response}`),
            sql` `,
          );
          const changed = writeHeader(
            await tx
              .update(keys)
              .set({
                status: KeyStatus.done,
                response: sql`CASE ${keys.id} ${answers} END`,
              })
              .where(
                or(
                  ...items.map((item) =>
                    ownerRow(keys, item.key, item.args.fingerprint, item.args.attempt),
                  ),
                ) as SQL,
              ),
          ).affectedRows;
          if (changed === items.length) return items.map(() => 1);
          const rows = new Map(
            (
              await tx
                .select({
                  id: keys.id,
                  fingerprint: keys.fingerprint,
                  status: keys.status,
                  attempt: keys.attempt,
                  response: keys.response,
                })
                .from(keys)
                .where(
                  inArray(
                    keys.id,
                    items.map((item) => item.key),
                  ),
                )
            ).map((row) => [row.id, row]),
          );
          // A row this statement did not change shows its answer under its token only when the
          // same owner had already written that very answer: the store's finish then answers
          // true all the same, from the row it reads after a 0.
          return items.map((item) => {
            const row = rows.get(item.key);
            return row !== undefined &&
              row.status === KeyStatus.done &&
              row.fingerprint === item.args.fingerprint &&
              Number(row.attempt) === item.args.attempt &&
              row.response === item.args.response
              ? 1
              : 0;
          });
        }),
      ),
  };
}

// The most calls one batched statement carries: a burst larger than this goes in several.
const MAX_BATCH_SIZE = 500;

/** How the batched statements of a MySQL store were sent, per statement: see {@link BatchSizes}. */
export interface MysqlBatchStats {
  /** Claims that insert a key (the INSERT that starts `acquire`). */
  readonly claims: BatchSizes;
  /** Fenced finishes (`finish` with a fencing token). */
  readonly finishes: BatchSizes;
  /** Replay reads (`fetch`). */
  readonly fetches: BatchSizes;
  /** Row reads (`get`: the read that starts a claim, and the read after a fenced finish that changed nothing). */
  readonly gets: BatchSizes;
}

type Batched = ReturnType<typeof batchedMysqlStatements>;

/**
 * The statements of a batching MySQL store: `single`, with its claims, fenced finishes, replay
 * reads and row reads sent through a {@link StatementBatch} each, so that the calls of one turn
 * go as one statement of `batched`; a lone call still runs its single-row statement, and so does
 * each call of a batch the server refused (an existing key among a batch of claims: the key is
 * then claimed, or taken over, as the single-row statements do).
 *
 * @param single - the store's single-row statements
 * @param batched - the batched statements, see {@link batchedMysqlStatements}
 */
export function batchingMysqlStatements(
  single: KeyStatements,
  batched: Batched,
): { readonly statements: KeyStatements; readonly stats: () => MysqlBatchStats } {
  const refused = mysqlRefused;
  const gets = new StatementBatch<undefined, KeyRow | undefined>(
    {
      one: ({ key }) => single.get(key),
      many: async (items) => {
        const found = new Map(
          (await batched.gets(items.map((item) => item.key))).map((row) => [row.id, row]),
        );
        return items.map((item) => found.get(item.key));
      },
      refused,
    },
    MAX_BATCH_SIZE,
  );
  const claims = new StatementBatch<BatchedLease & { readonly now: number }, AcquireStep>(
    {
      one: ({ key, args }) => single.acquire(key, args.fingerprint, args),
      many: async (items) => {
        await batched.inserts(items);
        return items.map((item) => ({ attempt: item.args.token }));
      },
      refused,
    },
    MAX_BATCH_SIZE,
  );
  const finishes = new StatementBatch<BatchedFinish, number>(
    {
      one: ({ key, args }) =>
        single.finishFenced(key, args.fingerprint, args.response, args.attempt),
      many: (items) => batched.finishes(items),
      refused,
    },
    MAX_BATCH_SIZE,
  );
  const fetches = new StatementBatch<number, string | null | undefined>(
    {
      one: ({ key, args }) => single.fetch(key, args),
      many: async (items) => {
        const found = new Map((await batched.fetches(items)).map((row) => [row.id, row.response]));
        return items.map((item) => found.get(item.key));
      },
      refused,
    },
    MAX_BATCH_SIZE,
  );
  return {
    statements: {
      ...single,
      acquire: (key, fingerprint, lease) => claims.run(key, { fingerprint, ...lease }),
      finishFenced: (key, fingerprint, response, attempt) =>
        finishes.run(key, { fingerprint, response, attempt }),
      fetch: (key, now) => fetches.run(key, now),
      get: (key) => gets.run(key, undefined),
    },
    stats: () => ({
      claims: claims.sizes(),
      finishes: finishes.sizes(),
      fetches: fetches.sizes(),
      gets: gets.sizes(),
    }),
  };
}
