import { PGlite } from '@electric-sql/pglite';
import { count, eq, sql } from 'drizzle-orm';
import { drizzle as drizzleNodePg } from 'drizzle-orm/node-postgres';
import { integer as pgInteger, pgSchema, text as pgText } from 'drizzle-orm/pg-core';
import { drizzle as drizzlePglite } from 'drizzle-orm/pglite';
import { drizzle as drizzlePostgresJs } from 'drizzle-orm/postgres-js';
import { integer, sqliteTable, text } from 'drizzle-orm/sqlite-core';
import pg from 'pg';
import postgres from 'postgres';
import { describe, expect, it } from 'vitest';
import { makeIdempotent } from '../../src/function/index.js';
import { InvalidOptionError } from '../../src/index.js';
import {
  applyLibsqlMigrations,
  libsqlTransaction,
  openLibsqlStore,
} from '../../src/libsql/index.js';
import { quoteIdentifier } from '../../src/pg/identifier.js';
import {
  type AnyPgDatabase,
  applyPgMigrations,
  PgIdempotencyStore,
  keys as pgDefaultKeys,
  pgTransaction,
} from '../../src/pg/index.js';
import {
  applySqliteMigrations,
  openSqliteStore,
  sqliteKeysTable,
  sqliteTransaction,
} from '../../src/sqlite/index.js';
import { fileUrl } from '../support/libsql-harness.js';
import { serverUrl, uniqueName } from '../support/pg.js';
import { freshDbPath, tempDir } from '../support/temp.js';
import {
  type Dialect,
  isUniqueViolation,
  linger,
  type Message,
  transactionalSuite,
} from './transactional-suite.js';

const dir = tempDir('idem-tx-');

// The stores keep their keys in a renamed table, beside a default `keys` table that stays empty.
const renamed = sqliteKeysTable('idem_keys');
const effects = sqliteTable('effects', {
  id: text('id').primaryKey(),
  amount: integer('amount').notNull(),
});
const defaultKeysCount = sql<number>`(SELECT count(*) FROM keys)`;

function sqliteDialect(): Dialect {
  const store = openSqliteStore(freshDbPath(dir), { table: renamed });
  applySqliteMigrations(store.db);
  store.db.run(sql`CREATE TABLE effects (id TEXT PRIMARY KEY, amount INTEGER NOT NULL)`);
  return {
    store,
    credit: (behaviour = {}) =>
      makeIdempotent(
        (tx, message: Message) => {
          if (behaviour.effectId !== undefined) {
            try {
              tx.insert(effects)
                .values({ ...message, id: behaviour.effectId })
                .run();
            } catch (error) {
              if (!isUniqueViolation(error)) throw error;
              return { conflict: behaviour.effectId };
            }
          } else tx.insert(effects).values(message).run();
          if (behaviour.fail) throw new Error('handler failed');
          if (behaviour.loseKey) tx.delete(renamed).where(eq(renamed.id, message.id)).run();
          return 'result' in behaviour ? behaviour.result : { credited: message.amount };
        },
        { transaction: sqliteTransaction(store), key: (message) => message.id },
      ),
    effects: async () => store.db.select().from(effects).orderBy(effects.id).all(),
    defaultKeys: async () => store.db.get<{ n: number }>(sql`SELECT ${defaultKeysCount} AS n`)?.n,
    close: async () => store.close(),
  };
}

async function libsqlDialect(): Promise<Dialect> {
  const store = await openLibsqlStore(fileUrl(freshDbPath(dir)), { table: renamed });
  await applyLibsqlMigrations(store.db);
  await store.db.run(sql`CREATE TABLE effects (id TEXT PRIMARY KEY, amount INTEGER NOT NULL)`);
  return {
    store,
    credit: (behaviour = {}) =>
      makeIdempotent(
        async (tx, message: Message) => {
          if (behaviour.effectId !== undefined) {
            try {
              await tx.insert(effects).values({ ...message, id: behaviour.effectId });
            } catch (error) {
              if (!isUniqueViolation(error)) throw error;
              return { conflict: behaviour.effectId };
            }
          } else await tx.insert(effects).values(message);
          if (behaviour.linger) await linger();
          if (behaviour.fail) throw new Error('handler failed');
          if (behaviour.loseKey) await tx.delete(renamed).where(eq(renamed.id, message.id));
          return 'result' in behaviour ? behaviour.result : { credited: message.amount };
        },
        { transaction: libsqlTransaction(store), key: (message) => message.id },
      ),
    effects: async () => store.db.select().from(effects).orderBy(effects.id),
    defaultKeys: async () =>
      (await store.db.get<{ n: number }>(sql`SELECT ${defaultKeysCount} AS n`))?.n,
    close: async () => store.close(),
  };
}

// `migrator` runs the DDL: the library's migrator needs node-postgres or PGlite today. The store
// is in a schema of its own; on a private database (PGlite) a default `public.keys` sits beside it.
async function pgDialect(
  db: AnyPgDatabase,
  dispose: () => Promise<void>,
  migrator: AnyPgDatabase = db,
  privateDatabase = false,
): Promise<Dialect> {
  const schema = uniqueName('tx');
  if (privateDatabase) await applyPgMigrations(migrator);
  await applyPgMigrations(migrator, { schema });
  await migrator.execute(
    sql.raw(
      `CREATE TABLE ${quoteIdentifier(schema)}.effects (id text PRIMARY KEY, amount integer NOT NULL)`,
    ),
  );
  const effects = pgSchema(schema).table('effects', {
    id: pgText('id').primaryKey(),
    amount: pgInteger('amount').notNull(),
  });
  const store = new PgIdempotencyStore(db, { schema });
  const { table } = store;
  return {
    store,
    credit: (behaviour = {}) =>
      makeIdempotent(
        async (tx, message: Message) => {
          if (behaviour.effectId !== undefined) {
            try {
              await tx.insert(effects).values({ ...message, id: behaviour.effectId });
            } catch (error) {
              if (!isUniqueViolation(error)) throw error;
              return { conflict: behaviour.effectId };
            }
          } else await tx.insert(effects).values(message);
          if (behaviour.linger) await linger();
          if (behaviour.fail) throw new Error('handler failed');
          if (behaviour.loseKey) await tx.delete(table).where(eq(table.id, message.id));
          return 'result' in behaviour ? behaviour.result : { credited: message.amount };
        },
        { transaction: pgTransaction(store), key: (message) => message.id },
      ),
    effects: async () => db.select().from(effects).orderBy(effects.id),
    defaultKeys: async () => {
      if (!privateDatabase) return undefined;
      const [row] = await migrator.select({ n: count() }).from(pgDefaultKeys);
      return row?.n;
    },
    close: async () => {
      await migrator.execute(sql.raw(`DROP SCHEMA ${quoteIdentifier(schema)} CASCADE`));
      await dispose();
    },
  };
}

const url = serverUrl();
const dialects: { name: string; open: () => Promise<Dialect> }[] = [
  { name: 'SQLite file (better-sqlite3)', open: async () => sqliteDialect() },
  { name: 'SQLite file (libSQL)', open: libsqlDialect },
  {
    name: 'PGlite',
    open: async () => {
      const client = new PGlite();
      return pgDialect(drizzlePglite({ client }), () => client.close(), undefined, true);
    },
  },
  ...(url === undefined
    ? []
    : [
        {
          name: 'PostgreSQL server (node-postgres)',
          open: async () => {
            const pool = new pg.Pool({ connectionString: url, max: 2 });
            return pgDialect(drizzleNodePg({ client: pool }), () => pool.end());
          },
        },
        {
          name: 'PostgreSQL server (postgres-js)',
          open: async () => {
            const client = postgres(url, { max: 2, onnotice: () => undefined });
            const pool = new pg.Pool({ connectionString: url, max: 1 });
            return pgDialect(
              drizzlePostgresJs({ client }),
              async () => {
                await client.end();
                await pool.end();
              },
              drizzleNodePg({ client: pool }),
            );
          },
        },
      ]),
];

transactionalSuite(dialects);

describe('transactional makeIdempotent on SQLite', () => {
  it('refuses an async handler, rolls it back and releases the key', async () => {
    const store = openSqliteStore(freshDbPath(dir));
    store.db.run(sql`CREATE TABLE effects (id TEXT PRIMARY KEY)`);
    const effects = sqliteTable('effects', { id: text('id').primaryKey() });
    const job = makeIdempotent(
      async (tx, id: string) => {
        tx.insert(effects).values({ id }).run();
        return id;
      },
      { transaction: sqliteTransaction(store), key: (id) => id },
    );
    await expect(job('k')).rejects.toBeInstanceOf(InvalidOptionError);
    expect(store.db.select().from(effects).all()).toEqual([]);
    expect(store.get('k')).toBeNull();
    store.close();
  });

  it('records the answer alone when SQLite rolled the transaction back under a handler that caught it', async () => {
    const store = openSqliteStore(freshDbPath(dir));
    store.db.run(sql`CREATE TABLE effects (id TEXT PRIMARY KEY)`);
    store.db.run(sql`INSERT INTO effects (id) VALUES ('taken')`);
    let runs = 0;
    const job = makeIdempotent(
      (tx, id: string) => {
        runs += 1;
        tx.run(sql`INSERT INTO effects (id) VALUES (${id})`);
        try {
          // OR ROLLBACK: the violation rolls back the whole transaction, not just the statement.
          tx.run(sql`INSERT OR ROLLBACK INTO effects (id) VALUES ('taken')`);
        } catch (error) {
          if (!isUniqueViolation(error)) throw error;
          return { conflict: id };
        }
        return { ran: id };
      },
      { transaction: sqliteTransaction(store), key: (id) => id },
    );
    expect(await job('k')).toEqual({ conflict: 'k' });
    expect(store.get('k')).toMatchObject({
      status: 'done',
      response: { value: { conflict: 'k' } },
    });
    expect(await job('k')).toEqual({ conflict: 'k' });
    expect(runs).toBe(1);
    // What SQLite rolled back stays rolled back, as on PostgreSQL after a caught failure.
    expect(store.db.all(sql`SELECT id FROM effects`)).toEqual([{ id: 'taken' }]);
    store.close();
  });

  it('records the answer alone when libSQL’s transaction was rolled back under a handler that caught it', async () => {
    const store = await openLibsqlStore(fileUrl(freshDbPath(dir)));
    await store.db.run(sql`CREATE TABLE effects (id TEXT PRIMARY KEY)`);
    await store.db.run(sql`INSERT INTO effects (id) VALUES ('taken')`);
    let runs = 0;
    const job = makeIdempotent(
      async (tx, id: string) => {
        runs += 1;
        await tx.run(sql`INSERT INTO effects (id) VALUES (${id})`);
        try {
          // OR ROLLBACK: the violation rolls back the whole transaction, not just the statement.
          await tx.run(sql`INSERT OR ROLLBACK INTO effects (id) VALUES ('taken')`);
        } catch (error) {
          if (!isUniqueViolation(error)) throw error;
          return { conflict: id };
        }
        return { ran: id };
      },
      { transaction: libsqlTransaction(store), key: (id) => id },
    );
    expect(await job('k')).toEqual({ conflict: 'k' });
    expect(await store.get('k')).toMatchObject({
      status: 'done',
      response: { value: { conflict: 'k' } },
    });
    expect(await job('k')).toEqual({ conflict: 'k' });
    expect(runs).toBe(1);
    expect(await store.db.all(sql`SELECT id FROM effects`)).toEqual([{ id: 'taken' }]);
    await store.close();
  });

  it('refuses a transaction option that is not a runner', () => {
    expect(() =>
      makeIdempotent((_tx: unknown, id: string) => id, {
        transaction: {} as never,
        key: (id) => id,
      }),
    ).toThrow(InvalidOptionError);
  });
});
