import { copyFileSync } from 'node:fs';
import { createClient } from '@libsql/client';
import Database from 'better-sqlite3';
import { drizzle } from 'drizzle-orm/libsql';
import { migrate } from 'drizzle-orm/libsql/migrator';
import { readMigrationFiles } from 'drizzle-orm/migrator';
import { describe, expect, it } from 'vitest';
import {
  applyLibsqlMigrations,
  LibsqlIdempotencyStore,
  openLibsqlStore,
  sqliteKeysTable,
} from '../../src/libsql/index.js';
import { openSqliteStore } from '../../src/sqlite/index.js';
import {
  appMigrationsFolder,
  NEWER_THAN_OURS,
  OLDER_THAN_OURS,
} from '../support/app-migrations.js';
import { fileUrl } from '../support/libsql-harness.js';
import { freshDbPath, tempDir } from '../support/temp.js';

// Every committed SQLite migration, each recorded once in the library's journal.
const MIGRATIONS = readMigrationFiles({
  migrationsFolder: new URL('../../drizzle/sqlite', import.meta.url).pathname,
}).length;

const dir = tempDir('idem-libsql-journal-');

interface JournalRow {
  hash: string;
  created_at: number;
}

// The tables of the file, and the rows of one journal table in it.
function tablesOf(path: string): string[] {
  const client = new Database(path, { readonly: true });
  try {
    return client
      .prepare("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")
      .pluck()
      .all() as string[];
  } finally {
    client.close();
  }
}

function journal(path: string, table: string): JournalRow[] {
  const client = new Database(path, { readonly: true });
  try {
    return client
      .prepare(`SELECT hash, created_at FROM "${table}" ORDER BY created_at`)
      .all() as JournalRow[];
  } finally {
    client.close();
  }
}

describe("the library's own migrations journal through libSQL", () => {
  for (const [age, when] of [
    ['older', OLDER_THAN_OURS],
    ['newer', NEWER_THAN_OURS],
  ] as const) {
    for (const order of ['app first', 'library first'] as const) {
      it(`app migrations ${age} than ours, ${order}: both apply, neither journal sees the other`, async () => {
        const path = freshDbPath(dir);
        const client = createClient({ url: fileUrl(path), timeout: 5000 });
        const db = drizzle({ client });
        const migrationsFolder = appMigrationsFolder(
          dir,
          'sqlite',
          when,
          'CREATE TABLE `orders` (`id` integer PRIMARY KEY NOT NULL);',
        );
        const steps = [() => migrate(db, { migrationsFolder }), () => applyLibsqlMigrations(db)];
        if (order === 'library first') steps.reverse();
        for (const step of [...steps, ...steps]) await step();
        const store = new LibsqlIdempotencyStore(db);
        expect(await store.reserve('k', 'd', 10)).toBe(true);
        await client.execute('INSERT INTO orders (id) VALUES (1)');
        client.close();
        expect(tablesOf(path)).toEqual([
          '__drizzle_migrations',
          '__idempotency_migrations',
          'keys',
          'orders',
        ]);
        expect(journal(path, '__drizzle_migrations').map((row) => Number(row.created_at))).toEqual([
          when,
        ]);
        expect(journal(path, '__idempotency_migrations')).toHaveLength(MIGRATIONS);
      });
    }
  }

  it('upgrades a file made by 0.1.0 in place: rows kept, our record copied once, the app journal untouched', async () => {
    const path = freshDbPath(dir);
    // Made by drizzle-idempotency 0.1.0 (git tag v0.1.0): openSqliteStore, then three rows.
    copyFileSync(new URL('../fixtures/v0.1.0/store.db', import.meta.url), path);
    const legacy = journal(path, '__drizzle_migrations');
    expect(legacy).toHaveLength(1);
    for (let open = 0; open < 2; open++) {
      const store = await openLibsqlStore<{ receipt: number }>(fileUrl(path));
      expect(await store.fetch('done-1', 1000)).toEqual({ receipt: 1 });
      expect(await store.reserve('pending-1', 'fp-pending', 1)).toBe(false);
      expect(await store.counts()).toEqual({ pending: 1, done: 2 });
      await store.close();
    }
    expect(journal(path, '__drizzle_migrations')).toEqual(legacy);
    expect(journal(path, '__idempotency_migrations')[0]).toEqual(legacy[0]);
  });

  it('keeps a renamed table apart, and shares it with the better-sqlite3 store', async () => {
    const path = freshDbPath(dir);
    const other = sqliteKeysTable('idem_keys');
    const first = await openLibsqlStore(fileUrl(path));
    const second = await openLibsqlStore(fileUrl(path), { table: other });
    expect(await first.reserve('k', 'a', 10)).toBe(true);
    expect(await second.reserve('k', 'b', 10)).toBe(true);
    await first.close();
    await second.close();
    const sync = openSqliteStore(path, { table: other });
    expect(sync.get('k')?.fingerprint).toBe('b');
    sync.close();
    expect(tablesOf(path)).toEqual([
      '__idempotency_migrations',
      '__idempotency_migrations_idem_keys',
      'idem_keys',
      'keys',
    ]);
  });
});
