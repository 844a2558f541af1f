import { sql } from 'drizzle-orm';
import { queryRows } from '../../src/pg/client.js';
import { quoteIdentifier } from '../../src/pg/identifier.js';
import { type AnyPgDatabase, applyPgMigrations } from '../../src/pg/index.js';
import { type Backlog, SWEEP_NOW, type Tally } from './backlog.js';

/**
 * Migrates `schema` and inserts the backlog in one statement per kind, with the same ids and
 * scattered expiry times as the SQLite `seedBacklog`, so index order `(expires, id)` differs from
 * id order and `x-0000000` is the first row a sweep deletes.
 */
export async function seedPgBacklog(
  db: AnyPgDatabase,
  schema: string,
  backlog: Backlog,
): Promise<void> {
  await applyPgMigrations(db, { schema });
  const table = sql.raw(`${quoteIdentifier(schema)}.keys`);
  const add = async (prefix: string, count: number, status: string, base: number) => {
    if (count === 0) return;
    await db.execute(sql`
      INSERT INTO ${table} (id, fingerprint, status, response, expires)
      SELECT ${prefix} || '-' || lpad(i::text, 7, '0'), 'd', ${status},
             CASE WHEN ${status} = 'done' THEN '{"r":1}' END, ${base} + ((i * 7919) % 1000)
      FROM generate_series(0, ${count - 1}::int) AS i`);
  };
  await add('x', backlog.expired, 'done', 1);
  await add('l', backlog.live ?? 0, 'done', SWEEP_NOW + 1);
  await add('p', backlog.pending ?? 0, 'pending', SWEEP_NOW + 1);
  await add('s', backlog.stalePending ?? 0, 'pending', 1);
}

/** Counts the rows of each kind in `schema.keys` at {@link SWEEP_NOW}. */
export async function tallyPg(db: AnyPgDatabase, schema: string): Promise<Tally> {
  const rows = await queryRows<{ status: string; past: boolean; n: number }>(
    db,
    sql`
    SELECT status, expires <= ${SWEEP_NOW} AS past, count(*)::int AS n
    FROM ${sql.raw(`${quoteIdentifier(schema)}.keys`)} GROUP BY status, past`,
  );
  const count = (status: string, past: boolean) =>
    rows.find((row) => row.status === status && row.past === past)?.n ?? 0;
  return {
    expired: count('done', true),
    live: count('done', false),
    pending: count('pending', false),
    stalePending: count('pending', true),
  };
}
