import { PGlite } from '@electric-sql/pglite';
import Database from 'better-sqlite3';
import { drizzle as drizzleSqlite } from 'drizzle-orm/better-sqlite3';
import { drizzle as drizzleMysql } from 'drizzle-orm/mysql2';
import { drizzle as drizzleNodePg } from 'drizzle-orm/node-postgres';
import { drizzle as drizzlePglite } from 'drizzle-orm/pglite';
import { afterAll, describe, expect, it } from 'vitest';
import { ErrorCode, UnrecognisedDatabaseError } from '../../src/index.js';
import { MysqlIdempotencyStore } from '../../src/mysql/index.js';
import { applyPgMigrations, PgIdempotencyStore } from '../../src/pg/index.js';

function refusal(make: () => unknown): UnrecognisedDatabaseError {
  try {
    make();
  } catch (error) {
    expect(error).toBeInstanceOf(UnrecognisedDatabaseError);
    expect((error as UnrecognisedDatabaseError).code).toBe(ErrorCode.unrecognisedDatabase);
    return error as UnrecognisedDatabaseError;
  }
  throw new Error('the store accepted it');
}

const sqlite = drizzleSqlite({ client: new Database(':memory:') });
afterAll(() => sqlite.$client.close());

describe('the PostgreSQL store given a database it does not recognise', () => {
  it('refuses what is not a drizzle PostgreSQL database', () => {
    expect(refusal(() => new PgIdempotencyStore({} as never)).message).toContain(
      'expected a drizzle database from drizzle-orm/node-postgres, postgres-js, pglite',
    );
    expect(refusal(() => new PgIdempotencyStore(null as never)).message).toContain('got null');
    expect(refusal(() => new PgIdempotencyStore(sqlite as never)).message).toContain(
      'got a BetterSQLite3Database',
    );
  });

  it('refuses a drizzle PostgreSQL database that runs on no client of a PostgreSQL driver', () => {
    // drizzle.mock() makes a database over an empty object, as a database built over something
    // that is not a driver's client would be.
    const error = refusal(() => new PgIdempotencyStore(drizzleNodePg.mock()));
    expect(error.message).toContain('does not run on a client of drizzle-orm/node-postgres');
    expect(refusal(() => new PgIdempotencyStore(drizzlePglite.mock())).message).toContain(
      'make it with drizzle({ client })',
    );
  });

  it('keeps a database made with drizzle({ client }), and a transaction of it', async () => {
    const client = new PGlite();
    try {
      const db = drizzlePglite({ client });
      await applyPgMigrations(db);
      expect(await new PgIdempotencyStore(db).reserve('k', 'd', 10)).toBe(true);
      const inTransaction = await db.transaction((tx) =>
        new PgIdempotencyStore(tx).reserve('t', 'd', 10),
      );
      expect(inTransaction).toBe(true);
      const { rows } = await client.query<{ id: string }>('SELECT id FROM keys ORDER BY id');
      expect(rows.map((row) => row.id)).toEqual(['k', 't']);
    } finally {
      await client.close();
    }
  });
});

describe('the MySQL store given a database it does not recognise', () => {
  it('refuses what is not a drizzle MySQL database', () => {
    expect(refusal(() => new MysqlIdempotencyStore({} as never)).message).toContain(
      'expected a drizzle database from drizzle-orm/mysql2 or planetscale-serverless',
    );
    expect(refusal(() => new MysqlIdempotencyStore(sqlite as never)).message).toContain(
      'got a BetterSQLite3Database',
    );
    expect(
      refusal(() => new MysqlIdempotencyStore(drizzlePglite.mock() as never)).message,
    ).toContain('got a PgliteDatabase');
  });

  it('refuses a drizzle MySQL database that runs on no mysql2 or PlanetScale client', () => {
    const error = refusal(() => new MysqlIdempotencyStore(drizzleMysql.mock()));
    expect(error.message).toContain('does not run on a client of drizzle-orm/mysql2');
  });
});
