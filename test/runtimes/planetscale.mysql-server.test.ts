import { DatabaseError } from '@planetscale/database';
import { sql } from 'drizzle-orm';
import { drizzle as drizzleMysql2 } from 'drizzle-orm/mysql2';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { makeIdempotent } from '../../src/function/index.js';
import {
  applyMysqlMigrations,
  applyPlanetscaleMigrations,
  mysqlKeysTable,
  PlanetscaleIdempotencyStore,
  planetscaleTransaction,
} from '../../src/mysql/index.js';
import { mysqlUrl } from '../support/mysql.js';
import { type Served, served } from '../support/planetscale-harness.js';

// Collected only when MYSQL_URL is set (see vitest.config.ts).
const url = mysqlUrl() as string;

describe('what the PlanetScale driver gives the store', () => {
  let s: Served;
  beforeAll(async () => {
    s = await served(url);
    await applyPlanetscaleMigrations(s.db);
  });
  afterAll(async () => s?.drop());
  const now = () => Date.now() / 1000;

  it('reads VARBINARY as a Uint8Array, and the store gives back the exact key', async () => {
    const key = 'ключ-🔑-Key ';
    const store = new PlanetscaleIdempotencyStore(s.db);
    expect(await store.reserve(key, 'd', now() - 1)).toBe(true);
    const raw = await s.client.execute('SELECT id FROM `keys`');
    expect(raw.rows[0]).toEqual({ id: expect.any(Uint8Array) });
    expect(Buffer.isBuffer((raw.rows[0] as { id: Uint8Array }).id)).toBe(false);
    expect((await store.get(key))?.fingerprint).toBe('d');
    expect(await store.finish(key, 'd', { ok: true })).toBe(true);
    expect(await store.expired(now() + 1, 10)).toEqual([key]);
    expect(await store.purge(now() + 1, 10)).toEqual([key]);
  });

  it('reports a duplicate as a DatabaseError with the errno only in its message; reserve answers false', async () => {
    const store = new PlanetscaleIdempotencyStore(s.db);
    expect(await store.reserve('dup', 'd', now() + 60)).toBe(true);
    const error = await s.client
      .execute(
        "INSERT INTO `keys` (id, fingerprint, status, expires) VALUES ('dup', 'd', 'pending', 1)",
      )
      .catch((caught: unknown) => caught);
    expect(error).toBeInstanceOf(DatabaseError);
    expect((error as { errno?: unknown }).errno).toBeUndefined();
    expect((error as Error).message).toMatch(/\(errno 1062\)/);
    expect(await store.reserve('dup', 'd', now() + 60)).toBe(false);
  });

  it('sends no SKIP LOCKED, FORCE INDEX or GET_LOCK, in the migrations, the purge or the sweep', async () => {
    const fresh = await served(url);
    try {
      await applyPlanetscaleMigrations(fresh.db);
      const store = new PlanetscaleIdempotencyStore(fresh.db);
      for (const key of ['a', 'b', 'c']) {
        await store.reserve(key, 'd', now() - 1);
        await store.finish(key, 'd', 1);
      }
      expect(await store.purge(now(), 2)).toEqual(['a', 'b']);
      expect(await store.sweepBatch(now(), 10)).toBe(1);
      const sent = fresh.endpoint.statements.join('\n').toLowerCase();
      expect(sent).toContain('for update');
      for (const refused of ['skip locked', 'force index', 'get_lock']) {
        expect(sent).not.toContain(refused);
      }
    } finally {
      await fresh.drop();
    }
  });
});

describe('applyPlanetscaleMigrations', () => {
  const journal = async (s: Served, name = '__idempotency_migrations') =>
    (
      (await s.direct.query(
        `SELECT created_at FROM \`${name}\` ORDER BY created_at`,
      )) as unknown as [{ created_at: number }[]]
    )[0].map((row) => Number(row.created_at));

  it('migrates a fresh database, then only reads; mysql2’s migrator finds it up to date', async () => {
    const s = await served(url);
    try {
      await applyPlanetscaleMigrations(s.db);
      const first = await journal(s);
      const sent = s.endpoint.statements.length;
      await applyPlanetscaleMigrations(s.db);
      expect(s.endpoint.statements.length - sent).toBe(2);
      expect(s.endpoint.statements.slice(sent).join(' ')).not.toMatch(/\b(create|insert|alter)\b/i);
      await applyMysqlMigrations(drizzleMysql2({ client: s.direct }));
      expect(await journal(s)).toEqual(first);
      expect(first.length).toBeGreaterThan(0);
    } finally {
      await s.drop();
    }
  });

  it('lets three instances migrate at once and ends with the table the store needs', async () => {
    const s = await served(url);
    try {
      const table = mysqlKeysTable('idem_keys');
      await Promise.all([1, 2, 3].map(() => applyPlanetscaleMigrations(s.db, { table })));
      const applied = new Set(await journal(s, '__idempotency_migrations_idem_keys'));
      await applyMysqlMigrations(drizzleMysql2({ client: s.direct }), { table });
      expect(new Set(await journal(s, '__idempotency_migrations_idem_keys'))).toEqual(applied);
      const store = new PlanetscaleIdempotencyStore(s.db, { table });
      expect(await store.reserve('k', 'd', Date.now() / 1000 + 60)).toBe(true);
    } finally {
      await s.drop();
    }
  });

  it('refuses a foreign table of the same name before writing', async () => {
    const s = await served(url);
    try {
      await s.direct.query('CREATE TABLE `keys` (id int PRIMARY KEY)');
      await expect(applyPlanetscaleMigrations(s.db)).rejects.toThrow(
        /cannot be used as an idempotency store/,
      );
      const [tables] = (await s.direct.query('SHOW TABLES')) as unknown as [object[]];
      expect(tables.length).toBe(1);
    } finally {
      await s.drop();
    }
  });
});

describe('planetscaleTransaction', () => {
  let s: Served;
  let store: PlanetscaleIdempotencyStore;
  const now = () => Date.now() / 1000;
  const effectRows = async () =>
    (
      (await s.direct.query('SELECT id, amount FROM effects ORDER BY id')) as unknown as [
        { id: string; amount: number }[],
      ]
    )[0];
  const lease = async (key: string) => {
    const acquired = await store.acquire(key, 'd', {
      expires: now() + 600,
      now: now(),
      leaseSeconds: 30,
    });
    if (acquired.status !== 'acquired') throw new Error(`not acquired: ${acquired.status}`);
    return { key, fingerprint: 'd', fencingToken: acquired.fencingToken };
  };

  beforeAll(async () => {
    s = await served(url);
    await applyPlanetscaleMigrations(s.db);
    await s.direct.query('CREATE TABLE effects (id varchar(64) PRIMARY KEY, amount int NOT NULL)');
    store = new PlanetscaleIdempotencyStore(s.db);
  });
  afterAll(async () => s?.drop());

  it('commits the handler’s writes and the answer together', async () => {
    const owner = await lease('t-commit');
    const outcome = await planetscaleTransaction(store).run(
      owner,
      async (tx) => {
        await tx.execute(sql`INSERT INTO effects (id, amount) VALUES (${'t-commit'}, 7)`);
        return { credited: 7 };
      },
      JSON.stringify,
    );
    expect(outcome).toEqual({ committed: true, result: { credited: 7 } });
    expect(await effectRows()).toContainEqual({ id: 't-commit', amount: 7 });
    expect((await store.get('t-commit'))?.response).toEqual({ credited: 7 });
  });

  it('commits nothing when the fence no longer matches (the lease was taken over)', async () => {
    const owner = await lease('t-fenced');
    await s.direct.query("UPDATE `keys` SET attempt = attempt + 1 WHERE id = 't-fenced'");
    const outcome = await planetscaleTransaction(store).run(
      owner,
      async (tx) => {
        await tx.execute(sql`INSERT INTO effects (id, amount) VALUES (${'t-fenced'}, 9)`);
        return { credited: 9 };
      },
      JSON.stringify,
    );
    expect(outcome).toEqual({ committed: false });
    expect((await effectRows()).some((row) => row.id === 't-fenced')).toBe(false);
    expect((await store.get('t-fenced'))?.status).toBe('pending');
  });

  it('rolls a throwing handler back', async () => {
    const owner = await lease('t-throw');
    await expect(
      planetscaleTransaction(store).run(
        owner,
        async (tx) => {
          await tx.execute(sql`INSERT INTO effects (id, amount) VALUES (${'t-throw'}, 1)`);
          throw new Error('handler failed');
        },
        JSON.stringify,
      ),
    ).rejects.toThrow('handler failed');
    expect((await effectRows()).some((row) => row.id === 't-throw')).toBe(false);
  });

  it('drives makeIdempotent: the effect once, the answer replayed', async () => {
    let runs = 0;
    const pay = makeIdempotent(
      async (tx, message: { id: string; amount: number }) => {
        runs += 1;
        await tx.execute(
          sql`INSERT INTO effects (id, amount) VALUES (${message.id}, ${message.amount})`,
        );
        return { credited: message.amount };
      },
      { transaction: planetscaleTransaction(store), key: (message) => message.id },
    );
    expect(await pay({ id: 't-make', amount: 5 })).toEqual({ credited: 5 });
    expect(await pay({ id: 't-make', amount: 5 })).toEqual({ credited: 5 });
    expect(runs).toBe(1);
  });
});
