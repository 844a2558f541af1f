import { PGlite } from '@electric-sql/pglite';
import { count, sql } from 'drizzle-orm';
import { drizzle as drizzlePglite } from 'drizzle-orm/pglite';
import {
  applyLibsqlMigrations,
  type LibsqlHandlerTransaction,
  libsqlTransaction,
  openLibsqlStore,
} from '../../src/libsql/index.js';
import { quoteIdentifier } from '../../src/pg/identifier.js';
import {
  type AnyPgDatabase,
  applyPgMigrations,
  type PgHandlerTransaction,
  PgIdempotencyStore,
  keys as pgDefaultKeys,
  pgTransaction,
} from '../../src/pg/index.js';
import {
  applySqliteMigrations,
  openSqliteStore,
  type SqliteHandlerTransaction,
  sqliteKeysTable,
  sqliteTransaction,
} from '../../src/sqlite/index.js';
import { fileUrl } from '../support/libsql-harness.js';
import { freshServerSchema, serverUrl, uniqueName } from '../support/pg.js';
import { freshDbPath, tempDir } from '../support/temp.js';
import {
  type DialectFactory,
  type HttpDialect,
  transactionDialectsSuite,
} from './transaction-dialects-suite.js';

const dir = tempDir('idem-http-tx-dialects-');

// The SQLite stores keep their keys in a renamed table, beside a default `keys` that stays empty.
const renamed = sqliteKeysTable('idem_keys');
const sqliteSetup = [
  sql`CREATE TABLE payments (ref TEXT PRIMARY KEY, amount INTEGER NOT NULL)`,
  sql`CREATE TRIGGER refuse_answers BEFORE UPDATE ON idem_keys
      WHEN NEW.status = 'done' AND NEW.id LIKE 'refused%'
      BEGIN SELECT RAISE(ABORT, 'answers of refused keys are refused'); END`,
];

function sqliteDialect(): HttpDialect<SqliteHandlerTransaction> {
  const store = openSqliteStore(freshDbPath(dir), { table: renamed });
  applySqliteMigrations(store.db);
  for (const statement of sqliteSetup) store.db.run(statement);
  return {
    runner: sqliteTransaction(store),
    pay(tx, order) {
      tx.run(sql`INSERT INTO payments (ref, amount) VALUES (${order.ref}, ${order.amount})`);
      return undefined;
    },
    payments: async () =>
      store.db.all<{ ref: string }>(sql`SELECT ref FROM payments`).map((row) => row.ref),
    defaultKeys: async () => store.db.get<{ n: number }>(sql`SELECT count(*) AS n FROM keys`)?.n,
    close: async () => store.close(),
  };
}

async function libsqlDialect(): Promise<HttpDialect<LibsqlHandlerTransaction>> {
  const store = await openLibsqlStore(fileUrl(freshDbPath(dir)), { table: renamed });
  await applyLibsqlMigrations(store.db);
  for (const statement of sqliteSetup) await store.db.run(statement);
  return {
    runner: libsqlTransaction(store),
    pay: (tx, order) =>
      tx.run(sql`INSERT INTO payments (ref, amount) VALUES (${order.ref}, ${order.amount})`),
    payments: async () =>
      (await store.db.all<{ ref: string }>(sql`SELECT ref FROM payments`)).map((row) => row.ref),
    defaultKeys: async () =>
      (await store.db.get<{ n: number }>(sql`SELECT count(*) AS n FROM keys`))?.n,
    close: async () => store.close(),
  };
}

// The store is in a schema of its own; on a private database (PGlite) a default `public.keys`
// sits beside it.
async function pgDialect(
  db: AnyPgDatabase,
  schema: string,
  dispose: () => Promise<void>,
  privateDatabase: boolean,
): Promise<HttpDialect<PgHandlerTransaction>> {
  if (privateDatabase) await applyPgMigrations(db);
  await applyPgMigrations(db, { schema });
  const s = quoteIdentifier(schema);
  await db.execute(
    sql.raw(`CREATE TABLE ${s}.payments (ref text PRIMARY KEY, amount integer NOT NULL)`),
  );
  await db.execute(
    sql.raw(`CREATE FUNCTION ${s}.refuse_answer() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN RAISE EXCEPTION 'answers of refused keys are refused'; END $$`),
  );
  await db.execute(
    sql.raw(`CREATE TRIGGER refuse_answers BEFORE UPDATE ON ${s}.keys FOR EACH ROW
      WHEN (NEW.status = 'done' AND NEW.id LIKE 'refused%') EXECUTE FUNCTION ${s}.refuse_answer()`),
  );
  const store = new PgIdempotencyStore(db, { schema });
  const payments = sql.raw(`${s}.payments`);
  return {
    runner: pgTransaction(store),
    pay: (tx, order) =>
      tx.execute(sql`INSERT INTO ${payments} (ref, amount) VALUES (${order.ref}, ${order.amount})`),
    payments: async () =>
      (await db.select({ ref: sql<string>`ref` }).from(sql`${payments}`)).map((row) => row.ref),
    defaultKeys: async () =>
      privateDatabase ? (await db.select({ n: count() }).from(pgDefaultKeys))[0]?.n : undefined,
    close: dispose,
  };
}

const url = serverUrl();
const dialects: DialectFactory[] = [
  { name: 'a SQLite file (better-sqlite3)', open: async () => sqliteDialect() as never },
  { name: 'a SQLite file (libSQL)', open: async () => (await libsqlDialect()) as never },
  {
    name: 'PGlite',
    open: async () => {
      const client = new PGlite();
      const dialect = await pgDialect(
        drizzlePglite({ client }),
        uniqueName('http_tx'),
        () => client.close(),
        true,
      );
      return dialect as never;
    },
  },
  ...(url === undefined
    ? []
    : [
        {
          name: 'the PostgreSQL server (node-postgres)',
          open: async () => {
            const server = await freshServerSchema(url, 20);
            return (await pgDialect(server.db, server.schema, () => server.drop(), false)) as never;
          },
        },
      ]),
];

transactionDialectsSuite(dialects);
