import { createClient } from '@libsql/client';
import Database from 'better-sqlite3';
import { drizzle } from 'drizzle-orm/better-sqlite3';
import { drizzle as drizzleLibsql } from 'drizzle-orm/libsql';
import { describe, expect, it } from 'vitest';
import { assertBackedBy } from '../../src/core/database-identity.js';
import { ErrorCode, UnrecognisedDatabaseError } from '../../src/index.js';
import { LibsqlIdempotencyStore } from '../../src/libsql/index.js';
import { applySqliteMigrations, SqliteIdempotencyStore } from '../../src/sqlite/index.js';
import { freshDbPath, tempDir } from '../support/temp.js';

const dir = tempDir();

function refusal(make: () => unknown): UnrecognisedDatabaseError {
  try {
    make();
  } catch (error) {
    expect(error).toBeInstanceOf(UnrecognisedDatabaseError);
    return error as UnrecognisedDatabaseError;
  }
  throw new Error('the store accepted it');
}

function countKeys(path: string): number {
  const client = new Database(path, { readonly: true });
  try {
    return (client.prepare('SELECT count(*) AS n FROM keys').get() as { n: number }).n;
  } finally {
    client.close();
  }
}

describe('a store given a database it does not recognise', () => {
  it('refuses a drizzle database over an anonymous temporary SQLite database', () => {
    // drizzle() with no client opens `new Database()`: what drizzle 1.0 makes of drizzle(client).
    const db = drizzle();
    try {
      const error = refusal(() => new SqliteIdempotencyStore(db));
      expect(error.code).toBe(ErrorCode.unrecognisedDatabase);
      expect(error.message).toContain('anonymous temporary');
      expect(error.message).toContain('drizzle({ client: new Database(path) })');
    } finally {
      db.$client.close();
    }
  });

  it('refuses objects that are not a drizzle database over better-sqlite3', async () => {
    expect(refusal(() => new SqliteIdempotencyStore({} as never)).message).toContain(
      'expected a drizzle database from drizzle-orm/better-sqlite3',
    );
    expect(refusal(() => new SqliteIdempotencyStore(null as never)).message).toContain('got null');
    const libsql = createClient({ url: `file:${freshDbPath(dir)}` });
    try {
      const error = refusal(
        () => new SqliteIdempotencyStore(drizzleLibsql({ client: libsql }) as never),
      );
      expect(error.message).toContain('does not run on a better-sqlite3 Database');
    } finally {
      libsql.close();
    }
  });

  it('refuses a better-sqlite3 database given to the libSQL store, and writes nothing', () => {
    const path = freshDbPath(dir);
    const db = drizzle({ client: new Database(path) });
    applySqliteMigrations(db);
    try {
      const error = refusal(() => new LibsqlIdempotencyStore(db as never));
      expect(error.message).toContain('does not run on a libSQL client');
      expect(countKeys(path)).toBe(0);
    } finally {
      db.$client.close();
    }
  });

  it('keeps a store on a file, and on :memory: asked for by name', () => {
    const path = freshDbPath(dir);
    const db = drizzle({ client: new Database(path) });
    applySqliteMigrations(db);
    const store = new SqliteIdempotencyStore(db);
    expect(store.reserve('k', 'd', 10)).toBe(true);
    store.close();
    expect(countKeys(path)).toBe(1);

    const memory = drizzle({ client: new Database(':memory:') });
    applySqliteMigrations(memory);
    const inMemory = new SqliteIdempotencyStore(memory);
    expect(inMemory.reserve('k', 'd', 10)).toBe(true);
    inMemory.close();
  });

  it('refuses, when opening, a drizzle database that runs on another client than it was made over', () => {
    const opened = new Database(freshDbPath(dir));
    const other = new Database(freshDbPath(dir));
    try {
      assertBackedBy(drizzle({ client: opened }), opened, 'better-sqlite3');
      const error = refusal(() =>
        assertBackedBy(drizzle({ client: other }), opened, 'better-sqlite3'),
      );
      expect(error.message).toContain('does not run on the better-sqlite3 client it was made over');
    } finally {
      opened.close();
      other.close();
    }
  });
});
