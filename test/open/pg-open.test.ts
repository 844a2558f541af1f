import { sql } from 'drizzle-orm';
import { describe, expect, it } from 'vitest';
import { InvalidOptionError, SchemaMismatchError } from '../../src/index.js';
import { queryRows } from '../../src/pg/client.js';
import { directNodePgClient } from '../../src/pg/compile.js';
import { quoteIdentifier } from '../../src/pg/identifier.js';
import { applyPgMigrations, PgIdempotencyStore, pgKeysTable } from '../../src/pg/index.js';
import { readPgRows, sharedPglite, uniqueName } from '../support/pg.js';
import { inspectSchema } from '../support/pg-inspect.js';

const database = sharedPglite();

const MIGRATED = {
  tables: ['__idempotency_migrations', 'keys'],
  indexes: [
    '__idempotency_migrations_pkey',
    'keys_done_id_expires_idx',
    'keys_pkey',
    'keys_status_expires_id_idx',
  ],
  migrations: 5,
};

async function createSchema(statements: (schema: string) => string[]): Promise<string> {
  const db = await database();
  const schema = uniqueName('m');
  for (const statement of [`CREATE SCHEMA ${schema}`, ...statements(schema)]) {
    await db.execute(sql.raw(statement));
  }
  return schema;
}

const contractColumns = (idType: string) =>
  `(id ${idType} PRIMARY KEY, fingerprint text, status text, response text, expires double precision)`;

describe('applyPgMigrations (PGlite)', () => {
  it('creates the schema, the table, its index and the bookkeeping, once', async () => {
    const db = await database();
    const schema = uniqueName('m');
    await applyPgMigrations(db, { schema });
    expect(await inspectSchema(db, schema)).toEqual(MIGRATED);
    const store = new PgIdempotencyStore(db, { schema });
    await store.reserve('a', 'd', 10);
    for (let i = 0; i < 3; i++) await applyPgMigrations(db, { schema });
    expect(await inspectSchema(db, schema)).toEqual(MIGRATED);
    expect(await readPgRows(db, schema)).toEqual([
      { id: 'a', fingerprint: 'd', status: 'pending', response: null, expires: 10 },
    ]);
  });

  it("runs drizzle's prepared queries, there being no node-postgres client to send them to", async () => {
    const db = await database();
    expect(directNodePgClient(db)).toBeUndefined();
    const schema = uniqueName('m');
    await applyPgMigrations(db, { schema });
    const store = new PgIdempotencyStore<{ receipt: number }>(db, { schema });
    expect(await store.reserve('k', 'd', 10.5)).toBe(true);
    expect(await store.finish('k', 'd', { receipt: 2 })).toBe(true);
    expect(await store.get('k')).toEqual({
      key: 'k',
      fingerprint: 'd',
      status: 'done',
      expires: 10.5,
      response: { receipt: 2 },
      leaseUntil: null,
      fencingToken: 1,
      unrecorded: false,
    });
  });

  it('quotes any schema name, and stores in different schemas stay apart', async () => {
    const db = await database();
    const odd = `Odd "schema" é ${uniqueName()}`;
    const plain = uniqueName('m');
    await applyPgMigrations(db, { schema: odd });
    await applyPgMigrations(db, { schema: plain });
    const first = new PgIdempotencyStore(db, { schema: odd });
    const second = new PgIdempotencyStore(db, { schema: plain });
    expect(await first.reserve('k', 'one', 10)).toBe(true);
    expect(await second.reserve('k', 'two', 10)).toBe(true);
    expect((await first.get('k'))?.fingerprint).toBe('one');
    expect((await second.get('k'))?.fingerprint).toBe('two');
    expect(await inspectSchema(db, odd)).toEqual(MIGRATED);
  });

  it('adopts a keys table made by hand with the same columns: rows stay, the index is added', async () => {
    const schema = await createSchema((s) => [
      `CREATE TABLE ${s}.keys ${contractColumns('text COLLATE "C"')}`,
      `INSERT INTO ${s}.keys VALUES ('old', 'fp', 'done', '{"r":1}', 50), ('busy', 'fp', 'pending', NULL, 1)`,
    ]);
    const db = await database();
    await applyPgMigrations(db, { schema });
    expect(await inspectSchema(db, schema)).toEqual(MIGRATED);
    const store = new PgIdempotencyStore(db, { schema });
    expect(await store.fetch('old', 10)).toEqual({ r: 1 });
    expect(await store.counts()).toEqual({ pending: 1, done: 1 });
  });

  it.each([
    [
      'other columns',
      '(id text COLLATE "C" PRIMARY KEY, value text)',
      /missing column fingerprint.*unexpected column value/,
    ],
    [
      'an extra column',
      `(id text COLLATE "C" PRIMARY KEY, fingerprint text, status text, response text, expires double precision, owner text)`,
      /unexpected column owner/,
    ],
    [
      'no primary key',
      '(id text COLLATE "C", fingerprint text, status text, response text, expires double precision)',
      /sole primary key/,
    ],
    [
      'a float4 expires',
      contractColumns('text COLLATE "C"').replace('double precision', 'real'),
      /expires is real/,
    ],
    ['ids in the default collation', contractColumns('text'), /collation default, expected "C"/],
  ])('refuses a keys table with %s and writes nothing', async (_, columns, message) => {
    const schema = await createSchema((s) => [
      `CREATE TABLE ${s}.keys ${columns}`,
      `INSERT INTO ${s}.keys (id) VALUES ('x')`,
    ]);
    const db = await database();
    const before = await inspectSchema(db, schema);
    const rows = async () =>
      (
        (await db.execute(sql.raw(`SELECT * FROM ${schema}.keys`))) as unknown as {
          rows: unknown[];
        }
      ).rows;
    const rowsBefore = await rows();
    await expect(applyPgMigrations(db, { schema })).rejects.toBeInstanceOf(SchemaMismatchError);
    await expect(applyPgMigrations(db, { schema })).rejects.toThrow(message);
    expect(await inspectSchema(db, schema)).toEqual(before);
    expect(await rows()).toEqual(rowsBefore);
    expect(before.migrations).toBeNull();
  });

  it.each([
    ['an empty name', ''],
    ['a name of 64 bytes', 'x'.repeat(64)],
    ['a name of 32 two-byte characters', 'é'.repeat(32)],
    ['a NUL', 'a\u0000b'],
    ['a lone surrogate', 'a\uD800'],
    ['a number', 5],
  ])('refuses %s as a schema before touching the database', async (_, schema) => {
    const db = await database();
    const before = await db.execute(sql`SELECT count(*)::int AS n FROM pg_namespace`);
    await expect(applyPgMigrations(db, { schema: schema as string })).rejects.toBeInstanceOf(
      InvalidOptionError,
    );
    expect(() => new PgIdempotencyStore(db, { schema: schema as string })).toThrow(
      InvalidOptionError,
    );
    expect(await db.execute(sql`SELECT count(*)::int AS n FROM pg_namespace`)).toEqual(before);
  });

  it("refuses pgKeysTable('x') read the 0.1.0 way, as a schema x that already holds the keys", async () => {
    const db = await database();
    const schema = uniqueName('old');
    await applyPgMigrations(db, { schema });
    const store = new PgIdempotencyStore(db, { table: pgKeysTable('keys', { schema }) });
    expect(await store.reserve('in-flight', 'd', 100)).toBe(true);
    // The call kept from 0.1.0 now names a table in public: refused, and nothing is created.
    await expect(applyPgMigrations(db, { table: pgKeysTable(schema) })).rejects.toThrow(
      SchemaMismatchError,
    );
    const made = await queryRows<{ found: boolean }>(
      db,
      sql`SELECT to_regclass(${`public.${schema}`}) IS NOT NULL AS found`,
    );
    expect(made).toEqual([{ found: false }]);
    // The reading it meant still works, and finds the key in flight.
    await applyPgMigrations(db, { table: pgKeysTable('keys', { schema }) });
    expect(await store.reserve('in-flight', 'd', 100)).toBe(false);
    // A table of that name made first is adopted: the refusal guards only the missing table.
    await db.execute(
      sql.raw(`CREATE TABLE public.${schema} ${contractColumns('text COLLATE "C"')}`),
    );
    await applyPgMigrations(db, { table: pgKeysTable(schema) });
    await db.execute(sql.raw(`DROP TABLE public.${schema}`));
  });

  it('accepts a name of exactly 63 bytes', async () => {
    const db = await database();
    const schema = `${uniqueName('m')}_`.padEnd(63, 'x');
    await applyPgMigrations(db, { schema });
    expect(await inspectSchema(db, schema)).toEqual(MIGRATED);
    expect(quoteIdentifier('a"b')).toBe('"a""b"');
  });
});
