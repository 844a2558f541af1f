import { execFileSync } from 'node:child_process';
import { chmodSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterEach, describe, expect, it } from 'vitest';
import { sqliteMigrations } from '../../src/generated/migrations.js';
import { DatabaseOpenError, type IdempotencyError, SchemaMismatchError } from '../../src/index.js';
import { openSqliteStore } from '../../src/sqlite/index.js';
import { fixture, runTs } from '../support/child.js';
import { snapshotDir } from '../support/rel-files.js';
import { scaled } from '../support/stress.js';
import { freshDbPath, tempDir } from '../support/temp.js';

const dir = tempDir();

function sqliteFile(path: string, ddl: string): void {
  const client = new Database(path);
  client.exec(ddl);
  client.close();
}

let caseCount = 0;
const undo: (() => void)[] = [];
afterEach(() => {
  for (const step of undo.splice(0)) step();
});

/** Makes a file unwritable even for root: immutable when running as root, mode 0444 otherwise. */
function makeReadOnly(path: string): void {
  if (process.getuid?.() === 0) {
    execFileSync('chattr', ['+i', path]);
    undo.push(() => execFileSync('chattr', ['-i', path]));
  } else {
    chmodSync(path, 0o444);
  }
}

const FOREIGN: [
  string,
  (path: string) => void,
  new (...args: never[]) => IdempotencyError,
  RegExp,
][] = [
  ['a directory', (path) => mkdirSync(path), DatabaseOpenError, /is a directory/],
  [
    'a text file',
    (path) => writeFileSync(path, 'order-42,pending\n'.repeat(500)),
    DatabaseOpenError,
    /not a SQLite database/,
  ],
  [
    'random bytes',
    (path) =>
      writeFileSync(path, Buffer.from(Array.from({ length: 8192 }, (_, i) => (i * 131) % 256))),
    DatabaseOpenError,
    /not a SQLite database/,
  ],
  [
    'a SQLite header over garbage',
    (path) => {
      const bytes = Buffer.alloc(8192, 0xab);
      bytes.write('SQLite format 3\0');
      writeFileSync(path, bytes);
    },
    DatabaseOpenError,
    /not a SQLite database/,
  ],
  [
    'a truncated database',
    (path) => {
      sqliteFile(path, 'CREATE TABLE other (a); INSERT INTO other VALUES (randomblob(100000))');
      writeFileSync(path, readFileSync(path).subarray(0, 8192));
    },
    DatabaseOpenError,
    /damaged/,
  ],
  [
    'a read-only store',
    (path) => {
      openSqliteStore(path).close();
      makeReadOnly(path);
    },
    DatabaseOpenError,
    /read-only/,
  ],
  [
    'a keys table with other columns',
    (path) =>
      sqliteFile(path, 'CREATE TABLE keys (id TEXT PRIMARY KEY, value TEXT, created INTEGER)'),
    SchemaMismatchError,
    /unexpected column value/,
  ],
  [
    'a keys table with one extra column',
    (path) =>
      sqliteFile(
        path,
        'CREATE TABLE keys (id TEXT PRIMARY KEY, fingerprint TEXT, status TEXT, response TEXT, expires REAL, owner TEXT); INSERT INTO keys VALUES (1, 2, 3, 4, 5, 6)',
      ),
    SchemaMismatchError,
    /unexpected column owner/,
  ],
  [
    'a view named keys with the right columns',
    (path) =>
      sqliteFile(
        path,
        'CREATE TABLE t (id TEXT PRIMARY KEY, fingerprint TEXT, status TEXT, response TEXT, expires REAL); CREATE VIEW keys AS SELECT * FROM t',
      ),
    SchemaMismatchError,
    /keys is a view/,
  ],
  [
    'a foreign __idempotency_migrations table',
    (path) => sqliteFile(path, 'CREATE TABLE __idempotency_migrations (version INTEGER)'),
    SchemaMismatchError,
    /__idempotency_migrations/,
  ],
  [
    "the purge index's name taken by another table",
    (path) =>
      sqliteFile(
        path,
        'CREATE TABLE other (a); CREATE INDEX keys_status_expires_id_idx ON other (a)',
      ),
    SchemaMismatchError,
    /already used by the table other/,
  ],
];

describe('foreign files: a typed error, and not one byte changed', () => {
  it.each(FOREIGN)('%s', (_, make, errorClass, message) => {
    caseCount++;
    const root = join(dir, `case-${caseCount}`);
    mkdirSync(root);
    const path = join(root, 'target.db');
    make(path);
    const before = snapshotDir(root);
    for (let attempt = 0; attempt < 2; attempt++) {
      let caught: unknown;
      try {
        openSqliteStore(path).close();
      } catch (error) {
        caught = error;
      }
      expect(caught).toBeInstanceOf(errorClass);
      expect((caught as Error).message).toMatch(message);
    }
    expect(snapshotDir(root)).toEqual(before);
  });
});

describe('concurrent init', () => {
  const rounds = scaled(4, 30);
  it(`three processes initialising one fresh file at once all succeed (${rounds} rounds)`, {
    timeout: scaled(120_000, 900_000),
  }, async () => {
    for (let round = 0; round < rounds; round++) {
      const path = freshDbPath(dir);
      // A missing file, then an empty one: SQLite treats both as a new database.
      if (round % 2 === 1) writeFileSync(path, '');
      const results = await Promise.all(
        [1, 2, 3].map(() => runTs(fixture('init-store.ts'), [path])),
      );
      for (const result of results) {
        expect(result.stderr).toBe('');
        expect(result.code).toBe(0);
        expect(JSON.parse(result.stdout)).toEqual({ pending: 0, done: 0 });
      }
      const client = new Database(path, { readonly: true });
      expect(client.pragma('integrity_check', { simple: true })).toBe('ok');
      expect(client.prepare('SELECT count(*) AS n FROM __idempotency_migrations').get()).toEqual({
        n: sqliteMigrations.length,
      });
      expect(
        client
          .prepare(
            "SELECT name FROM sqlite_master WHERE tbl_name = 'keys' AND sql IS NOT NULL ORDER BY name",
          )
          .all(),
      ).toEqual([
        { name: 'keys' },
        { name: 'keys_done_id_expires_idx' },
        { name: 'keys_status_expires_id_idx' },
      ]);
      client.close();
    }
  });
});
