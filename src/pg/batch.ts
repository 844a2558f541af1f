import { eq, type SQL, sql } from 'drizzle-orm';
import type { KeyStatements } from '../core/async-store.js';
import { leaseTakeover, liveAnswer, ownerRow } from '../core/key-conditions.js';
import type { AcquireStep } from '../core/key-store.js';
import type { KeyRow } from '../core/record.js';
import { type BatchItem, type BatchSizes, StatementBatch } from '../core/statement-batch.js';
import { KeyStatus } from '../core/status.js';
import type { AnyPgDatabase } from './client.js';
import { compilePgStatement, type PgStatementMode } from './compile.js';
import { keyRowColumns, type PgKeysTable } from './schema.js';

const p = sql.placeholder;

/** The lease one call of a batched claim writes, as the single-row statements take it. */
interface BatchedLease {
  readonly fingerprint: string;
  readonly expires: number;
  readonly leaseUntil: number;
  readonly token: number;
}

// The claim's new rows, one per call, in the order of the arrays (keys ascending, so two batches
// lock the keys they share in the same order). The array parameters make the statement text the
// same whatever the batch's size, so it is parsed once per connection like the single-row ones.
function askedClaims(withNow: boolean): SQL {
  const now = withNow ? sql`, ${p('nows')}::float8[]` : sql``;
  const nowColumn = withNow ? sql`, now` : sql``;
  return sql`select * from unnest(${p('ids')}::text[], ${p('fingerprints')}::text[], ${p('expires')}::float8[], ${p('leaseUntils')}::float8[], ${p('tokens')}::int8[]${now}) with ordinality as asked(id, fingerprint, expires, lease_until, attempt${nowColumn}, ord)`;
}

// `insert into keys (…) select … from asked`: the columns a claim writes, a pending row of the
// caller's fingerprint, lease and token, as the single-row claim's `leasedRow`.
function insertAsked(keys: PgKeysTable): SQL {
  const column = (name: string) => sql.identifier(name);
  return sql`insert into ${keys} (${column(keys.id.name)}, ${column(keys.fingerprint.name)}, ${column(keys.status.name)}, ${column(keys.expires.name)}, ${column(keys.leaseUntil.name)}, ${column(keys.attempt.name)}, ${column(keys.unrecorded.name)}) select asked.id, asked.fingerprint, ${KeyStatus.pending}, asked.expires, asked.lease_until, asked.attempt, false from asked order by asked.ord`;
}

/**
 * The batched statements of a PostgreSQL store: each takes the values of many calls as arrays
 * (one per argument, unnested on the server) and answers per key, so a batch of calls is one
 * statement, one round trip and one commit. Each does for every key exactly what its single-row
 * statement of `prepareQueries` does for one; the calls of one statement are of distinct keys.
 *
 * @param db - the primary database the store's statements run on
 * @param keys - the keys table
 * @param name - the statement name of an operation (see `statementNames`)
 * @param mode - the store's statement mode
 */
export function batchedPgStatements(
  db: AnyPgDatabase,
  keys: PgKeysTable,
  name: (operation: string) => string,
  mode: PgStatementMode,
) {
  const rowColumns = keyRowColumns(keys);
  const claimNames = ['ids', 'fingerprints', 'expires', 'leaseUntils', 'tokens'] as const;
  const asked = db
    .$with('asked', {
      id: sql<string>`id`.as('id'),
      ord: sql<number>`ord`.as('ord'),
    })
    .as(askedClaims(false));
  const inserted = db
    .$with('inserted', {
      id: sql<string>`id`.as('id'),
      attempt: sql<number | string>`attempt`.as('attempt'),
    })
    .as(
      sql`${insertAsked(keys)} on conflict do nothing returning ${sql.identifier(keys.id.name)} as id, ${sql.identifier(keys.attempt.name)} as attempt`,
    );
  const askedWithNow = db.$with('asked', { id: sql<string>`id`.as('id') }).as(askedClaims(true));
  const takeover = leaseTakeover(
    keys,
    sql`(select asked.now from asked where asked.id = excluded.${sql.identifier(keys.id.name)})`,
  );
  const taken = db
    .$with('taken', {
      id: sql<string>`id`.as('id'),
      attempt: sql<number | string>`attempt`.as('attempt'),
    })
    .as(
      sql`${insertAsked(keys)} on conflict (${sql.identifier(keys.id.name)}) do update set ${sql.identifier(keys.attempt.name)} = ${takeover.set.attempt}, ${sql.identifier(keys.leaseUntil.name)} = ${takeover.set.leaseUntil}, ${sql.identifier(keys.expires.name)} = ${takeover.set.expires} where ${takeover.setWhere} returning ${sql.identifier(keys.id.name)} as id, ${sql.identifier(keys.attempt.name)} as attempt`,
    );
  const finishing = sql`unnest(${p('ids')}::text[], ${p('fingerprints')}::text[], ${p('responses')}::text[], ${p('attempts')}::int8[]) as finishing(id, fingerprint, response, attempt)`;
  const reading = sql`unnest(${p('ids')}::text[], ${p('nows')}::float8[]) as reading(id, now)`;
  return {
    // As `insertOrGet`, for many keys: each missing key inserted, each other one read as the
    // statement's snapshot has it (a row committed after the snapshot is not read, and the claim
    // then decides it, as for one key).
    claims: compilePgStatement(
      db,
      name('insert_or_get_batch'),
      db
        .with(asked, inserted)
        .select({
          asked: sql<string>`asked.id`.as('asked'),
          inserted_attempt: sql<number | string | null>`inserted.attempt`.as('inserted_attempt'),
          ...rowColumns,
        })
        .from(asked)
        .leftJoin(inserted, sql`inserted.id = asked.id`)
        .leftJoin(keys, eq(keys.id, sql`asked.id`))
        .orderBy(sql`asked.ord`),
      claimNames,
      mode,
    ),
    // As `acquire`, for many keys: each key inserted, or its lapsed lease taken over (judged at
    // its own caller's `now`); the ids won and their tokens.
    takeovers: compilePgStatement(
      db,
      name('acquire_batch'),
      db
        .with(askedWithNow, taken)
        .select({
          id: sql<string>`taken.id`.as('id'),
          attempt: sql<number | string>`taken.attempt`.as('attempt'),
        })
        .from(taken),
      [...claimNames, 'nows'],
      mode,
    ),
    // As `finishFenced`, for many keys: the ids finished.
    finishes: compilePgStatement(
      db,
      name('finish_fenced_batch'),
      db
        .update(keys)
        .set({ status: KeyStatus.done, response: sql<string>`finishing.response` })
        .from(finishing)
        .where(
          ownerRow(keys, sql`finishing.id`, sql`finishing.fingerprint`, sql`finishing.attempt`),
        )
        .returning({ id: keys.id }),
      ['ids', 'fingerprints', 'responses', 'attempts'],
      mode,
    ),
    // As `fetch`, for many keys, each at its own caller's `now`: the live answers found.
    fetches: compilePgStatement(
      db,
      name('fetch_batch'),
      db
        .select({ id: keys.id, response: keys.response })
        .from(keys)
        .innerJoin(reading, liveAnswer(keys, sql`reading.id`, sql`reading.now`)),
      ['ids', 'nows'],
      mode,
    ),
    // As `get`, for many keys: the rows found.
    gets: compilePgStatement(
      db,
      name('get_batch'),
      db
        .select(rowColumns)
        .from(keys)
        .where(sql`${keys.id} = any(${p('ids')}::text[])`),
      ['ids'],
      mode,
    ),
  };
}

// The most calls one batched statement carries: a burst larger than this goes in several.
const MAX_BATCH_SIZE = 500;

/** How the batched statements of a store were sent, per statement: see {@link BatchSizes}. */
export interface PgBatchStats {
  /** Claims of a key (the insert-or-read that starts `acquire`). */
  readonly claims: BatchSizes;
  /** Claims that found the key and try to take its lapsed lease over. */
  readonly takeovers: BatchSizes;
  /** Fenced finishes (`finish` with a fencing token). */
  readonly finishes: BatchSizes;
  /** Replay reads (`fetch`) on the primary. */
  readonly fetches: BatchSizes;
  /** Row reads (`get`, and the reads after a claim or a fenced finish that changed nothing). */
  readonly gets: BatchSizes;
}

type Batched = ReturnType<typeof batchedPgStatements>;

// Rows answered by key, for the statements that answer only the keys they found or changed.
const byId = <R extends { readonly id: string }>(rows: readonly R[]) =>
  new Map(rows.map((row) => [row.id, row]));

/**
 * The statements of a batching store: `single`, with its claims, takeovers, fenced finishes,
 * primary replay reads and row reads sent through a {@link StatementBatch} each, so that the
 * calls of one turn go as one statement of `batched`; a lone call still runs its single-row
 * statement.
 *
 * @param single - the store's single-row statements
 * @param batched - the batched statements, see {@link batchedPgStatements}
 * @param batchFetches - whether `fetch` is batched too: not when it reads replicas first
 */
export function batchingPgStatements(
  single: KeyStatements,
  batched: Batched,
  batchFetches: boolean,
): { readonly statements: KeyStatements; readonly stats: () => PgBatchStats } {
  const insertOrGet = single.insertOrGet;
  if (insertOrGet === undefined) throw new Error('the PostgreSQL store claims with insertOrGet');
  const gets = new StatementBatch<undefined, KeyRow | undefined>(
    {
      one: ({ key }) => single.get(key),
      many: async (items) => {
        const found = byId(await batched.gets({ ids: items.map((item) => item.key) }));
        return items.map((item) => found.get(item.key));
      },
    },
    MAX_BATCH_SIZE,
  );
  const leaseArrays = (items: readonly BatchItem<BatchedLease>[]) => ({
    ids: items.map((item) => item.key),
    fingerprints: items.map((item) => item.args.fingerprint),
    expires: items.map((item) => item.args.expires),
    leaseUntils: items.map((item) => item.args.leaseUntil),
    tokens: items.map((item) => item.args.token),
  });
  const claims = new StatementBatch<BatchedLease, AcquireStep>(
    {
      one: ({ key, args }) => insertOrGet(key, args.fingerprint, args),
      many: async (items) => {
        const found = new Map(
          (await batched.claims(leaseArrays(items))).map((row) => [row.asked, row]),
        );
        return items.map((item): AcquireStep => {
          const row = found.get(item.key);
          if (row === undefined) throw new Error('the batched claim answered no row for a key');
          const { asked: _asked, inserted_attempt: attempt, ...stored } = row;
          if (attempt !== null) return { attempt };
          return { row: stored.id === null ? undefined : (stored as KeyRow) };
        });
      },
    },
    MAX_BATCH_SIZE,
  );
  const takeovers = new StatementBatch<BatchedLease & { readonly now: number }, AcquireStep>(
    {
      one: ({ key, args }) => single.acquire(key, args.fingerprint, args),
      many: async (items) => {
        const won = byId(
          await batched.takeovers({
            ...leaseArrays(items),
            nows: items.map((item) => item.args.now),
          }),
        );
        // What a key not won holds is read as the single-row acquire reads it, after the write.
        return Promise.all(
          items.map(async (item): Promise<AcquireStep> => {
            const taken = won.get(item.key);
            if (taken !== undefined) return { attempt: taken.attempt };
            return { row: await gets.run(item.key, undefined) };
          }),
        );
      },
    },
    MAX_BATCH_SIZE,
  );
  const finishes = new StatementBatch<
    { readonly fingerprint: string; readonly response: string; readonly attempt: number },
    number
  >(
    {
      one: ({ key, args }) =>
        single.finishFenced(key, args.fingerprint, args.response, args.attempt),
      many: async (items) => {
        const finished = byId(
          await batched.finishes({
            ids: items.map((item) => item.key),
            fingerprints: items.map((item) => item.args.fingerprint),
            responses: items.map((item) => item.args.response),
            attempts: items.map((item) => item.args.attempt),
          }),
        );
        return items.map((item) => (finished.has(item.key) ? 1 : 0));
      },
    },
    MAX_BATCH_SIZE,
  );
  const fetches = new StatementBatch<number, string | null | undefined>(
    {
      one: ({ key, args }) => single.fetch(key, args),
      many: async (items) => {
        const found = byId(
          await batched.fetches({
            ids: items.map((item) => item.key),
            nows: items.map((item) => item.args),
          }),
        );
        return items.map((item) => found.get(item.key)?.response);
      },
    },
    MAX_BATCH_SIZE,
  );
  return {
    statements: {
      ...single,
      insertOrGet: (key, fingerprint, lease) =>
        claims.run(key, {
          fingerprint,
          expires: lease.expires,
          leaseUntil: lease.leaseUntil,
          token: lease.token,
        }),
      acquire: (key, fingerprint, lease) => takeovers.run(key, { fingerprint, ...lease }),
      finishFenced: (key, fingerprint, response, attempt) =>
        finishes.run(key, { fingerprint, response, attempt }),
      fetch: batchFetches ? (key, now) => fetches.run(key, now) : single.fetch,
      get: (key) => gets.run(key, undefined),
    },
    stats: () => ({
      claims: claims.sizes(),
      takeovers: takeovers.sizes(),
      finishes: finishes.sizes(),
      fetches: fetches.sizes(),
      gets: gets.sizes(),
    }),
  };
}
