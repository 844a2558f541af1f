import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { doneIdIndexName } from '../../src/core/table-name.js';
import { shippedCore, shippedSqlite } from './shipped.js';

const { DEFAULT_BATCH_SIZE } = shippedCore;
const { openSqliteStore } = shippedSqlite;

/** A temporary directory for benchmark databases, removed by `cleanup`. */
export function benchDir(): { dir: string; cleanup: () => void } {
  const dir = mkdtempSync(join(tmpdir(), 'idem-bench-'));
  return { dir, cleanup: () => rmSync(dir, { recursive: true, force: true }) };
}

/**
 * The partial index of done rows by id (migration 0002) on the bench's `keys` table: dropped on
 * copies to measure what it costs.
 */
export const DONE_INDEX = doneIdIndexName('keys');

let counter = 0;

/** A new database file path inside `dir`, with the table created by the store's own migrations. */
export function freshStoreFile(dir: string): string {
  counter += 1;
  const path = join(dir, `bench-${counter}.db`);
  openSqliteStore(path).close();
  return path;
}

// A random UUID written by SQLite, so a million of them cost one statement: expired and live rows
// interleave in id order, as real random keys do.
const UUID = `lower(printf('%s-%s-4%s-%s-%s', hex(randomblob(4)), hex(randomblob(2)),
  substr(hex(randomblob(2)), 2), hex(randomblob(2)), hex(randomblob(6))))`;

/** The rowids a {@link seedKeys} call gave its rows: one contiguous range. */
export interface SeededRows {
  readonly first: number;
  readonly last: number;
}

/**
 * Inserts `count` rows in one statement on a separate connection (so the store's own connection
 * keeps its pragmas), with UUID ids and 64-hex fingerprints: `expired` done rows with `expires`
 * rising from 0 to 1000 in insertion order, or live rows (one in ten pending, the rest done) with
 * `expires` far in the future. Returns the rowids the rows got.
 */
export function seedKeys(
  path: string,
  count: number,
  kind: 'expired' | 'live',
  table = 'keys',
): SeededRows {
  const client = new Database(path);
  try {
    const status =
      kind === 'expired' ? "'done'" : "CASE WHEN n.i % 10 = 0 THEN 'pending' ELSE 'done' END";
    const response =
      kind === 'expired'
        ? `'{"receipt":1}'`
        : `CASE WHEN n.i % 10 = 0 THEN NULL ELSE '{"receipt":1}' END`;
    // Deadlines grow with insertion order, as they do with one retention period: the backlog is
    // the oldest rows.
    const expires = kind === 'expired' ? `(n.i * 1000.0 / ${count})` : '(1e9 + n.i)';
    // One statement holds the write lock throughout, so its rows get consecutive rowids.
    const last =
      count === 0
        ? 0
        : Number(
            client
              .prepare(
                `INSERT INTO ${table} (id, fingerprint, status, response, expires)
                 WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i < ? - 1)
                 SELECT ${UUID}, lower(hex(randomblob(32))), ${status}, ${response}, ${expires} FROM n`,
              )
              .run(count).lastInsertRowid,
          );
    const first = last - count + 1;
    // Write the seeded pages into the database now, so no timed operation pays for it.
    client.pragma('wal_checkpoint(TRUNCATE)');
    return { first, last };
  } finally {
    client.close();
  }
}

/** `now` at which every seeded expired row is past its deadline and no live row is. */
export const SEEDED_NOW = 5000;

/**
 * The library's first batch, and the fixed batch size the shipped sweep had before its batches were
 * sized by time: `sqlite-sweep-impact` measures fixed batches of it, and of
 * {@link LARGE_SWEEP_BATCH}, beside the shipped sweep; the RSS children and the plain rowid deletes
 * use it as their fixed batch.
 */
export const SWEEP_BATCH = DEFAULT_BATCH_SIZE;

/** A larger batch, measured beside the default to show what batch size costs a waiting writer. */
export const LARGE_SWEEP_BATCH = 500;
