import { execFile } from 'node:child_process';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { drizzle } from 'drizzle-orm/better-sqlite3';
import { migrate } from 'drizzle-orm/better-sqlite3/migrator';
import { describe, expect, it } from 'vitest';
import { makeIdempotent } from '../../src/function/index.js';
import { sqliteMigrations } from '../../src/generated/migrations.js';
import { storedId } from '../../src/http/scope.js';
import { openSqliteStore } from '../../src/sqlite/index.js';
import { packedTarball, scratchApp } from '../package/scratch-app.js';
import { appMigrationsFolder, NEWER_THAN_OURS } from '../support/app-migrations.js';
import { idem, jsonLine } from '../support/cli.js';
import { freshDbPath, tempDir } from '../support/temp.js';

const dir = tempDir('idem-cli-help-');

function tables(path: string): string[] {
  const client = new Database(path, { readonly: true });
  try {
    return (
      client.prepare("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name").all() as {
        name: string;
      }[]
    ).map((row) => row.name);
  } finally {
    client.close();
  }
}

// A file whose keys table the application's own drizzle-kit migrations made from the exported
// table: every statement of ours in one migration of the application's, applied by drizzle's
// migrate() and recorded in drizzle's journal, none in ours.
function appMadeFile(): string {
  const path = freshDbPath(dir);
  const sql = sqliteMigrations
    .flatMap((migration) => migration.sql)
    .join('\n--> statement-breakpoint\n');
  const folder = appMigrationsFolder(dir, 'sqlite', NEWER_THAN_OURS, sql);
  const client = new Database(path);
  migrate(drizzle({ client }), { migrationsFolder: folder });
  client.close();
  return path;
}

describe('idem on a table the application made', () => {
  it('reads it without complaint, and the first write command records it in our journal', async () => {
    const path = appMadeFile();
    const before = tables(path);
    expect(before).toContain('keys');
    expect(before).not.toContain('__idempotency_migrations');
    const stats = await idem(['stats', '--db', path, '--json']);
    expect(stats.stderr).toBe('');
    expect(stats.code).toBe(0);
    expect(jsonLine(stats)).toMatchObject({ pending: 0, done: 0 });
    expect(tables(path)).toEqual(before);
    const purge = await idem(['purge', '--db', path, '--now', '100', '--json']);
    expect(purge.stderr).toBe('');
    expect(purge.code).toBe(0);
    expect(tables(path)).toContain('__idempotency_migrations');
    const client = new Database(path, { readonly: true });
    const recorded = client.prepare('SELECT created_at FROM __idempotency_migrations').all();
    client.close();
    expect(recorded).toHaveLength(sqliteMigrations.length);
  });

  it('refuses a table lacking columns of this version, with the command to run', async () => {
    const path = appMadeFile();
    const client = new Database(path);
    client.exec('ALTER TABLE keys DROP COLUMN unrecorded');
    client.close();
    const stats = await idem(['stats', '--db', path]);
    expect(stats.code).toBe(1);
    expect(stats.stderr.trim().split('\n')).toHaveLength(1);
    expect(stats.stderr).toContain('(columns unrecorded)');
    expect(stats.stderr).toContain(`"idem migrate --db ${path}"`);
  });
});

describe('idem output for people', () => {
  it('says so when a list is empty, keeping stdout empty for scripts', async () => {
    const path = freshDbPath(dir);
    openSqliteStore(path).close();
    const [pending, stale, expired, json] = await Promise.all([
      idem(['pending', '--db', path]),
      idem(['pending', '--stale', '--db', path]),
      idem(['expired', '--db', path, '--now', '100']),
      idem(['pending', '--db', path, '--json']),
    ]);
    expect(pending).toMatchObject({
      code: 0,
      stdout: '',
      stderr: 'no pending keys: no request is in flight\n',
    });
    expect(stale.stderr).toBe('no stale pending keys: none is waiting for a person\n');
    expect(expired).toMatchObject({
      code: 0,
      stdout: '',
      stderr: 'no expired answers: a sweep has nothing to delete now\n',
    });
    expect(json).toMatchObject({ code: 0, stdout: '[]\n', stderr: '' });
  });

  it('prints durations in days, hours, minutes and seconds', async () => {
    const path = freshDbPath(dir);
    const store = openSqliteStore(path);
    store.acquire('far', 'fp', { expires: 100 + 258_693, now: 100, leaseSeconds: 45 });
    store.close();
    const pending = await idem(['pending', '--db', path, '--now', '100']);
    expect(pending.stdout).toMatch(
      /^far {2}live {2}token \d+ {2}lease ends in 45s {2}expires in 2d 23h\n$/,
    );
  });

  it('names the scopes of a key shown without one, and the command to type', async () => {
    const path = freshDbPath(dir);
    const store = openSqliteStore(path);
    for (const id of [storedId('client-7', 'n-1'), storedId('client-8', 'n-1'), 'N-1x']) {
      store.acquire(id, 'fp', { expires: 1000, now: 100, leaseSeconds: 30 });
    }
    store.close();
    const show = await idem(['show', 'n-1', '--db', path]);
    expect(show.code).toBe(1);
    expect(show.stderr).toBe(
      'idem: no row with the key n-1 outside a scope; it is stored under the scope(s) client-7, client-8: type "idem show --scope client-7 n-1"\n',
    );
    const scoped = await idem(['show', '--scope', 'client-8', 'n-1', '--db', path, '--json']);
    expect(jsonLine(scoped).key).toBe(storedId('client-8', 'n-1'));
  });

  it('shows the value a makeIdempotent caller stored, not its envelope', async () => {
    const path = freshDbPath(dir);
    const store = openSqliteStore(path);
    const plain = makeIdempotent(async (n: number) => ({ receipt: n }), {
      store,
      key: (n) => `plain-${n}`,
    });
    const dated = makeIdempotent(async () => new Date('2026-01-02T03:04:05.000Z'), {
      store,
      key: () => 'dated',
    });
    await plain(7);
    await dated();
    store.close();
    const [text, json, date] = await Promise.all([
      idem(['show', 'plain-7', '--body', '--db', path]),
      idem(['show', 'plain-7', '--body', '--db', path, '--json']),
      idem(['show', 'dated', '--body', '--db', path]),
    ]);
    expect(text.stdout).toContain('answer       a makeIdempotent result');
    expect(text.stdout.endsWith('\n\n{"receipt":7}\n')).toBe(true);
    expect(jsonLine(json).answer).toMatchObject({ kind: 'result', value: { receipt: 7 } });
    expect(date.stdout.endsWith('\n\n2026-01-02T03:04:05.000Z\n')).toBe(true);
  });
});

interface Run {
  code: number;
  stdout: string;
  stderr: string;
}

// The installed `idem` of an application, as `npx idem` runs it.
function installedIdem(app: string, args: string[]): Promise<Run> {
  const bin = join(app, 'node_modules', 'drizzle-idempotency', 'dist', 'cli', 'main.js');
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      [bin, ...args],
      { cwd: app, env: { ...process.env, IDEM_DB: '', DATABASE_URL: '' } },
      (error, stdout, stderr) => {
        const code = error === null ? 0 : typeof error.code === 'number' ? error.code : -1;
        resolve({ code, stdout, stderr });
      },
    );
  });
}

describe('idem in an application without some drivers', () => {
  it('reads a SQLite file through @libsql/client when better-sqlite3 is not installed', async () => {
    const app = await scratchApp(join(dir, 'libsql-app'), await packedTarball(), [
      'better-sqlite3',
    ]);
    const path = freshDbPath(dir);
    const store = openSqliteStore(path);
    store.acquire('k-1', 'fp', { expires: 1000, now: 100, leaseSeconds: 30 });
    store.close();
    const stats = await installedIdem(app, ['stats', '--db', path, '--json', '--now', '100']);
    expect(stats.stderr).toBe('');
    expect(JSON.parse(stats.stdout)).toMatchObject({ pending: 1, done: 0 });
    const show = await installedIdem(app, ['show', 'k-1', '--db', path, '--now', '100']);
    expect(show.stdout).toContain('status       pending (live)');
  }, 600_000);

  it('names the package to install in one line, without a stack', async () => {
    const app = await scratchApp(join(dir, 'bare-app'), await packedTarball(), [
      'better-sqlite3',
      '@libsql/client',
      'pg',
      'mysql2',
    ]);
    const path = freshDbPath(dir);
    openSqliteStore(path).close();
    const [sqlite, pg, mysql] = await Promise.all([
      installedIdem(app, ['stats', '--db', path]),
      installedIdem(app, ['stats', '--url', 'postgres://postgres@127.0.0.1:1/test']),
      installedIdem(app, ['stats', '--url', 'mysql://root@127.0.0.1:1/test']),
    ]);
    expect(sqlite).toMatchObject({ code: 1, stdout: '' });
    expect(sqlite.stderr).toBe(
      'idem: a SQLite database file needs the better-sqlite3 or the @libsql/client package, which is not installed here: install it with "npm install better-sqlite3" or "npm install @libsql/client"\n',
    );
    expect(pg.stderr).toBe(
      'idem: a PostgreSQL URL needs the pg package, which is not installed here: install it with "npm install pg"\n',
    );
    expect(mysql.stderr).toBe(
      'idem: a MySQL URL needs the mysql2 package, which is not installed here: install it with "npm install mysql2"\n',
    );
  }, 600_000);
});
