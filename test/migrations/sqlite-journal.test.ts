import { copyFileSync } from 'node:fs';
import Database from 'better-sqlite3';
import { drizzle } from 'drizzle-orm/better-sqlite3';
import { migrate } from 'drizzle-orm/better-sqlite3/migrator';
import { describe, expect, it } from 'vitest';
import {
  applySqliteMigrations,
  openSqliteStore,
  SqliteIdempotencyStore,
  sqliteKeysTable,
} from '../../src/sqlite/index.js';
import {
  appMigrationsFolder,
  NEWER_THAN_OURS,
  OLDER_THAN_OURS,
} from '../support/app-migrations.js';
import { freshDbPath, tempDir } from '../support/temp.js';

const dir = tempDir();

function tables(client: Database.Database): string[] {
  return (
    client.prepare("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name").all() as {
      name: string;
    }[]
  ).map((row) => row.name);
}

function journal(client: Database.Database, table: string): { hash: string; created_at: number }[] {
  return client.prepare(`SELECT hash, created_at FROM "${table}" ORDER BY created_at`).all() as {
    hash: string;
    created_at: number;
  }[];
}

describe("the library's own migrations journal (SQLite)", () => {
  for (const [age, when] of [
    ['older', OLDER_THAN_OURS],
    ['newer', NEWER_THAN_OURS],
  ] as const) {
    for (const order of ['app first', 'library first'] as const) {
      it(`app migrations ${age} than ours, ${order}: both apply, neither journal sees the other`, () => {
        const client = new Database(freshDbPath(dir));
        const db = drizzle({ client });
        const migrationsFolder = appMigrationsFolder(
          dir,
          'sqlite',
          when,
          'CREATE TABLE `orders` (`id` integer PRIMARY KEY NOT NULL);',
        );
        const steps = [() => migrate(db, { migrationsFolder }), () => applySqliteMigrations(db)];
        if (order === 'library first') steps.reverse();
        for (const step of [...steps, ...steps]) step();
        expect(tables(client)).toEqual([
          '__drizzle_migrations',
          '__idempotency_migrations',
          'keys',
          'orders',
        ]);
        expect(
          journal(client, '__drizzle_migrations').map((row) => Number(row.created_at)),
        ).toEqual([when]);
        expect(journal(client, '__idempotency_migrations')).toHaveLength(4);
        const store = new SqliteIdempotencyStore(db);
        expect(store.reserve('k', 'd', 10)).toBe(true);
        client.prepare('INSERT INTO orders (id) VALUES (1)').run();
        client.close();
      });
    }
  }

  it('upgrades a file made by 0.1.0 in place: rows kept, our record copied once, the app journal untouched', () => {
    const path = freshDbPath(dir);
    // Made by drizzle-idempotency 0.1.0 (git tag v0.1.0): openSqliteStore, then three rows.
    copyFileSync(new URL('../fixtures/v0.1.0/store.db', import.meta.url), path);
    const before = new Database(path);
    const legacy = journal(before, '__drizzle_migrations');
    const rows = before.prepare('SELECT * FROM keys ORDER BY id').all();
    before.close();
    expect(legacy).toHaveLength(1);

    for (let open = 0; open < 2; open++) {
      const store = openSqliteStore<{ receipt: number }>(path);
      expect(store.fetch('done-1', 1000)).toEqual({ receipt: 1 });
      expect(store.reserve('pending-1', 'fp-pending', 1)).toBe(false);
      expect(store.counts()).toEqual({ pending: 1, done: 2 });
      // The lease columns arrived: the old pending row has no lease and is never taken over.
      expect(store.get('pending-1')).toMatchObject({
        leaseUntil: null,
        fencingToken: 1,
        unrecorded: false,
      });
      expect(
        store.acquire('pending-1', 'fp-pending', { expires: 1, now: 3e9, leaseSeconds: 1 }),
      ).toMatchObject({
        status: 'inProgress',
        leaseUntil: null,
      });
      store.close();
    }
    const after = new Database(path, { readonly: true });
    expect(
      after
        .prepare('SELECT id, fingerprint, status, response, expires FROM keys ORDER BY id')
        .all(),
    ).toEqual(
      rows.map((row) => {
        const { id, fingerprint, status, response, expires } = row as Record<string, unknown>;
        return { id, fingerprint, status, response, expires };
      }),
    );
    expect(journal(after, '__drizzle_migrations')).toEqual(legacy);
    expect(journal(after, '__idempotency_migrations')[0]).toEqual(legacy[0]);
    after.close();
  });

  it("adopts a table the app's drizzle-kit generated with every column, lease columns included", () => {
    const client = new Database(freshDbPath(dir));
    client.exec(`CREATE TABLE \`keys\` (\`id\` text PRIMARY KEY NOT NULL, \`fingerprint\` text NOT NULL,
      \`status\` text NOT NULL, \`response\` text, \`expires\` real NOT NULL, \`lease_until\` real,
      \`attempt\` integer DEFAULT 1 NOT NULL, \`unrecorded\` integer DEFAULT false NOT NULL)`);
    const db = drizzle({ client });
    applySqliteMigrations(db);
    applySqliteMigrations(db);
    const store = new SqliteIdempotencyStore(db);
    expect(store.acquire('k', 'd', { expires: 10, now: 1, leaseSeconds: 5 })).toMatchObject({
      status: 'acquired',
    });
    expect(journal(client, '__idempotency_migrations')).toHaveLength(4);
    client.close();
  });

  it('keeps a renamed table apart: its own journal, index names derived from it', () => {
    const path = freshDbPath(dir);
    const other = sqliteKeysTable('idem_keys');
    const first = openSqliteStore(path);
    const second = openSqliteStore(path, { table: other });
    expect(first.reserve('k', 'a', 10)).toBe(true);
    expect(second.reserve('k', 'b', 10)).toBe(true);
    expect(second.get('k')?.fingerprint).toBe('b');
    first.close();
    second.close();
    const client = new Database(path, { readonly: true });
    expect(tables(client)).toEqual([
      '__idempotency_migrations',
      '__idempotency_migrations_idem_keys',
      'idem_keys',
      'keys',
    ]);
    expect(
      client
        .prepare(
          "SELECT name, tbl_name FROM sqlite_master WHERE type = 'index' AND sql IS NOT NULL ORDER BY name",
        )
        .all(),
    ).toEqual([
      { name: 'idem_keys_done_id_expires_idx', tbl_name: 'idem_keys' },
      { name: 'idem_keys_status_expires_id_idx', tbl_name: 'idem_keys' },
      { name: 'keys_done_id_expires_idx', tbl_name: 'keys' },
      { name: 'keys_status_expires_id_idx', tbl_name: 'keys' },
    ]);
    client.close();
  });

  it('refuses a table name it cannot use, before opening anything', () => {
    for (const name of ['', '1keys', 'a-b', 'a"b', 'x'.repeat(39)]) {
      expect(() => sqliteKeysTable(name)).toThrow(/table name/);
    }
    expect(sqliteKeysTable('x'.repeat(38))).toBeDefined();
  });
});
