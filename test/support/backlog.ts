import Database from 'better-sqlite3';
import { openSqliteStore } from '../../src/sqlite/index.js';

/** The `now` every backlog is seeded around. */
export const SWEEP_NOW = 1000;

/** How many rows of each kind to seed. */
export interface Backlog {
  /** `done` rows with `expires <= SWEEP_NOW`: what a sweep deletes. */
  readonly expired: number;
  /** `done` rows with `expires > SWEEP_NOW`. */
  readonly live?: number;
  /** `pending` rows with `expires > SWEEP_NOW`. */
  readonly pending?: number;
  /** `pending` rows with `expires <= SWEEP_NOW`: never deleted. */
  readonly stalePending?: number;
}

/** The rows of each kind found in a file, in the shape of {@link Backlog}. */
export type Tally = Required<Backlog>;

/**
 * Creates the store at `path` and inserts the backlog with raw prepared inserts in one
 * transaction (fast enough for hundreds of thousands of rows). Expiry times are scattered so the
 * index order `(expires, id)` differs from id order.
 */
export function seedBacklog(path: string, backlog: Backlog): void {
  openSqliteStore(path).close();
  const client = new Database(path);
  try {
    const insert = client.prepare(
      'INSERT INTO keys (id, fingerprint, status, response, expires) VALUES (?, ?, ?, ?, ?)',
    );
    const add = (prefix: string, count: number, status: string, base: number) => {
      for (let i = 0; i < count; i++) {
        const id = `${prefix}-${String(i).padStart(7, '0')}`;
        insert.run(
          id,
          'd',
          status,
          status === 'done' ? '{"r":1}' : null,
          base + ((i * 7919) % 1000),
        );
      }
    };
    client.transaction(() => {
      add('x', backlog.expired, 'done', 1);
      add('l', backlog.live ?? 0, 'done', SWEEP_NOW + 1);
      add('p', backlog.pending ?? 0, 'pending', SWEEP_NOW + 1);
      add('s', backlog.stalePending ?? 0, 'pending', 1);
    })();
  } finally {
    client.close();
  }
}

/** Counts the rows of each kind at {@link SWEEP_NOW}, through its own connection. */
export function tally(path: string): Tally {
  const client = new Database(path);
  try {
    const rows = client
      .prepare('SELECT status, expires <= ? AS past, count(*) AS n FROM keys GROUP BY status, past')
      .all(SWEEP_NOW) as { status: string; past: number; n: number }[];
    const count = (status: string, past: number) =>
      rows.find((row) => row.status === status && row.past === past)?.n ?? 0;
    return {
      expired: count('done', 1),
      live: count('done', 0),
      pending: count('pending', 0),
      stalePending: count('pending', 1),
    };
  } finally {
    client.close();
  }
}

/** `PRAGMA integrity_check` of the file: `'ok'` when the database is consistent. */
export function integrity(path: string): string {
  const client = new Database(path);
  try {
    return client.pragma('integrity_check', { simple: true }) as string;
  } finally {
    client.close();
  }
}
