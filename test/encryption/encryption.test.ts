import Database from 'better-sqlite3';
import { sql } from 'drizzle-orm';
import { afterAll } from 'vitest';
import type { Keyring } from '../../src/core/encryption.js';
import { openLibsqlStore } from '../../src/libsql/index.js';
import { applyPgMigrations, PgIdempotencyStore, pgKeysTable } from '../../src/pg/index.js';
import {
  openSqliteStore,
  openSqliteWorkerStore,
  SqliteGroupCommitStore,
} from '../../src/sqlite/index.js';
import { fileUrl } from '../support/libsql-harness.js';
import { sharedPglite, uniqueName } from '../support/pg.js';
import { freshDbPath, tempDir } from '../support/temp.js';
import { type EncryptionHarness, encryptionSuite } from './encryption-suite.js';

const dir = tempDir('idem-encryption-');

// The file as another process sees it: the response column read with a connection of its own.
function sqliteFile(
  open: (
    path: string,
    encryption?: Keyring,
  ) => Promise<
    EncryptionHarness['open'] extends (...args: never[]) => infer R ? Awaited<R> : never
  >,
): () => Promise<EncryptionHarness> {
  return async () => {
    const path = freshDbPath(dir);
    const raw = new Database(path);
    raw.pragma('busy_timeout = 5000');
    afterAll(() => raw.close());
    return {
      open: (encryption) => open(path, encryption),
      responses: async () =>
        new Map(
          (
            raw.prepare('SELECT id, response FROM keys').all() as {
              id: string;
              response: string | null;
            }[]
          ).map((row) => [row.id, row.response]),
        ),
      overwrite: async (id, value) => {
        raw.prepare('UPDATE keys SET response = ? WHERE id = ?').run(value, id);
      },
    };
  };
}

encryptionSuite(
  'SQLite (better-sqlite3)',
  sqliteFile(async (path, encryption) =>
    openSqliteStore(path, encryption === undefined ? {} : { encryption }),
  ),
);
encryptionSuite(
  'SQLite with group commit',
  sqliteFile(
    async (path, encryption) =>
      new SqliteGroupCommitStore(
        openSqliteStore(path, encryption === undefined ? {} : { encryption }),
      ),
  ),
);
encryptionSuite(
  'SQLite on a worker thread',
  sqliteFile((path, encryption) =>
    openSqliteWorkerStore(path, encryption === undefined ? {} : { encryption }),
  ),
);
encryptionSuite(
  'libSQL',
  sqliteFile((path, encryption) =>
    openLibsqlStore(fileUrl(path), encryption === undefined ? {} : { encryption }),
  ),
);

const pglite = sharedPglite();
encryptionSuite('PostgreSQL (PGlite)', async () => {
  const db = await pglite();
  const schema = uniqueName('enc');
  const table = pgKeysTable('keys', { schema });
  await applyPgMigrations(db, { table });
  const qualified = sql.raw(`"${schema}"."keys"`);
  return {
    open: async (encryption) =>
      new PgIdempotencyStore(db, { table, ...(encryption === undefined ? {} : { encryption }) }),
    responses: async () => {
      const result = (await db.execute(sql`SELECT id, response FROM ${qualified}`)) as unknown as {
        rows: { id: string; response: string | null }[];
      };
      return new Map(result.rows.map((row) => [row.id, row.response]));
    },
    overwrite: async (id, value) => {
      await db.execute(sql`UPDATE ${qualified} SET response = ${value} WHERE id = ${id}`);
    },
  };
});
