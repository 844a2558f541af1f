import { PGlite } from '@electric-sql/pglite';
import { eq, sql } from 'drizzle-orm';
import { drizzle as drizzleNodePg } from 'drizzle-orm/node-postgres';
import { integer as pgInteger, pgSchema, text as pgText } from 'drizzle-orm/pg-core';
import { drizzle as drizzlePglite } from 'drizzle-orm/pglite';
import { drizzle as drizzlePostgresJs } from 'drizzle-orm/postgres-js';
import { integer, sqliteTable, text } from 'drizzle-orm/sqlite-core';
import pg from 'pg';
import postgres from 'postgres';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  CallSupersededError,
  type IdempotencyStore,
  InvalidOptionError,
  makeIdempotent,
  UnserializableResponseError,
} from '../../src/index.js';
import {
  type AnyPgDatabase,
  applyPgMigrations,
  PgIdempotencyStore,
  pgKeysTable,
  pgTransaction,
  quoteIdentifier,
} from '../../src/pg/index.js';
import { openSqliteStore, keys as sqliteKeys, sqliteTransaction } from '../../src/sqlite/index.js';
import { serverUrl, uniqueName } from '../support/pg.js';
import { freshDbPath, tempDir } from '../support/temp.js';

interface Message {
  readonly id: string;
  readonly amount: number;
}

/** What a handler does inside the transaction, besides writing its effect row. */
interface Behaviour {
  /** Throw after writing the effect. */
  readonly fail?: boolean;
  /** Delete the key's row (as a takeover or a manual release would) before returning. */
  readonly loseKey?: boolean;
  /** Return this instead of the default result. */
  readonly result?: unknown;
}

interface Dialect {
  readonly store: IdempotencyStore<unknown>;
  credit(behaviour?: Behaviour): (message: Message) => Promise<unknown>;
  effects(): Promise<{ id: string; amount: number }[]>;
  close(): Promise<void>;
}

const dir = tempDir('idem-tx-');

function sqliteDialect(): Dialect {
  const store = openSqliteStore(freshDbPath(dir));
  store.db.run(sql`CREATE TABLE effects (id TEXT PRIMARY KEY, amount INTEGER NOT NULL)`);
  const effects = sqliteTable('effects', {
    id: text('id').primaryKey(),
    amount: integer('amount').notNull(),
  });
  return {
    store,
    credit: (behaviour = {}) =>
      makeIdempotent(
        (tx, message: Message) => {
          tx.insert(effects).values(message).run();
          if (behaviour.fail) throw new Error('handler failed');
          if (behaviour.loseKey) tx.delete(sqliteKeys).where(eq(sqliteKeys.id, message.id)).run();
          return 'result' in behaviour ? behaviour.result : { credited: message.amount };
        },
        { transaction: sqliteTransaction(store), key: (message) => message.id },
      ),
    effects: async () => store.db.select().from(effects).orderBy(effects.id).all(),
    close: async () => store.close(),
  };
}

// `migrator` runs the DDL: the library's migrator needs node-postgres or PGlite today.
async function pgDialect(
  db: AnyPgDatabase,
  dispose: () => Promise<void>,
  migrator: AnyPgDatabase = db,
): Promise<Dialect> {
  const schema = uniqueName('tx');
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
  const table = pgKeysTable(schema);
  const store = new PgIdempotencyStore(db, { schema });
  return {
    store,
    credit: (behaviour = {}) =>
      makeIdempotent(
        async (tx, message: Message) => {
          await tx.insert(effects).values(message);
          if (behaviour.fail) throw new Error('handler failed');
          if (behaviour.loseKey) await tx.delete(table).where(eq(table.id, message.id));
          return 'result' in behaviour ? behaviour.result : { credited: message.amount };
        },
        { transaction: pgTransaction(store, { table }), key: (message) => message.id },
      ),
    effects: async () => db.select().from(effects).orderBy(effects.id),
    close: async () => {
      await migrator.execute(sql.raw(`DROP SCHEMA ${quoteIdentifier(schema)} CASCADE`));
      await dispose();
    },
  };
}

const url = serverUrl();
const dialects: { name: string; open: () => Promise<Dialect> }[] = [
  { name: 'SQLite file (better-sqlite3)', open: async () => sqliteDialect() },
  {
    name: 'PGlite',
    open: async () => {
      const client = new PGlite();
      return pgDialect(drizzlePglite(client), () => client.close());
    },
  },
  ...(url === undefined
    ? []
    : [
        {
          name: 'PostgreSQL server (node-postgres)',
          open: async () => {
            const pool = new pg.Pool({ connectionString: url, max: 2 });
            return pgDialect(drizzleNodePg(pool), () => pool.end());
          },
        },
        {
          name: 'PostgreSQL server (postgres-js)',
          open: async () => {
            const client = postgres(url, { max: 2, onnotice: () => undefined });
            const pool = new pg.Pool({ connectionString: url, max: 1 });
            return pgDialect(
              drizzlePostgresJs(client),
              async () => {
                await client.end();
                await pool.end();
              },
              drizzleNodePg(pool),
            );
          },
        },
      ]),
];

describe.each(dialects)('transactional makeIdempotent on $name', ({ open }) => {
  let d: Dialect;
  beforeAll(async () => {
    d = await open();
  });
  afterAll(async () => d?.close());
  let counter = 0;
  const message = (amount = 5): Message => {
    counter += 1;
    return { id: `m${counter}`, amount };
  };

  it('commits the effect and the result together, and replays without running', async () => {
    const credit = d.credit();
    const m = message(7);
    expect(await credit(m)).toEqual({ credited: 7 });
    expect(await credit(m)).toEqual({ credited: 7 });
    expect((await d.effects()).filter((e) => e.id === m.id)).toEqual([m]);
    const record = await d.store.get(m.id);
    expect(record?.status).toBe('done');
    expect(record?.response).toEqual({ value: { credited: 7 } });
  });

  it('rolls a throwing handler back and releases the key', async () => {
    const m = message();
    await expect(d.credit({ fail: true })(m)).rejects.toThrow('handler failed');
    expect((await d.effects()).some((e) => e.id === m.id)).toBe(false);
    expect(await d.store.get(m.id)).toBeNull();
    expect(await d.credit()(m)).toEqual({ credited: 5 });
    expect((await d.effects()).filter((e) => e.id === m.id)).toHaveLength(1);
  });

  it('rolls back a result that cannot be stored, and releases the key', async () => {
    const m = message();
    await expect(d.credit({ result: { total: Number.NaN } })(m)).rejects.toBeInstanceOf(
      UnserializableResponseError,
    );
    expect((await d.effects()).some((e) => e.id === m.id)).toBe(false);
    expect(await d.store.get(m.id)).toBeNull();
  });

  it('rolls everything back when the key is no longer this call’s', async () => {
    const m = message();
    await expect(d.credit({ loseKey: true })(m)).rejects.toBeInstanceOf(CallSupersededError);
    expect((await d.effects()).some((e) => e.id === m.id)).toBe(false);
    // The rollback restored the pending row the call had claimed: its owner's, not this call's.
    expect((await d.store.get(m.id))?.status).toBe('pending');
  });
});

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

  it('refuses a transaction option that is not a runner', () => {
    expect(() =>
      makeIdempotent((_tx: unknown, id: string) => id, {
        transaction: {} as never,
        key: (id) => id,
      }),
    ).toThrow(InvalidOptionError);
  });
});
