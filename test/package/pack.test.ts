import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { tempDir } from '../support/temp.js';
import { buildAndPack, installedManifest, node, scratchApp, writeFiles } from './scratch-app.js';

// One build and one tarball for the whole file: the build is the slow part.
let app: string;
let packageDir: string;

beforeAll(async () => {
  const work = tempDir('idem-pack-');
  const tarball = await buildAndPack(work);
  app = await scratchApp(join(work, 'app'), tarball);
  packageDir = join(app, 'node_modules', 'drizzle-idempotency');
}, 600_000);

function subpaths(): string[] {
  return Object.keys(installedManifest(app).exports)
    .filter((subpath) => subpath !== './package.json')
    .map((subpath) => `drizzle-idempotency${subpath.slice(1)}`);
}

function filesUnder(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) =>
    entry.isDirectory() ? filesUnder(join(dir, entry.name)) : [join(dir, entry.name)],
  );
}

const LOAD_WITH_REQUIRE = `
const out = {};
for (const name of JSON.parse(process.argv[1])) {
  out[name] = { file: require.resolve(name), exports: Object.keys(require(name)).sort() };
}
console.log(JSON.stringify(out));
`;

const LOAD_WITH_IMPORT = `
const out = {};
for (const name of JSON.parse(process.argv[1])) {
  out[name] = { file: import.meta.resolve(name), exports: Object.keys(await import(name)).sort() };
}
console.log(JSON.stringify(out));
`;

type Loaded = Record<string, { file: string; exports: string[] }>;

describe('the packed package installed in an application', () => {
  it('loads every subpath with require and with import, each from its own build, alike', async () => {
    const names = subpaths();
    expect(names).toContain('drizzle-idempotency/sqlite');
    const required = JSON.parse(
      (await node(app, ['-e', LOAD_WITH_REQUIRE, JSON.stringify(names)])).stdout,
    ) as Loaded;
    const imported = JSON.parse(
      (await node(app, ['--input-type=module', '-e', LOAD_WITH_IMPORT, JSON.stringify(names)]))
        .stdout,
    ) as Loaded;
    for (const name of names) {
      expect(required[name]?.file, name).toMatch(/\.cjs$/);
      expect(imported[name]?.file, name).toMatch(/\.js$/);
      expect(required[name]?.exports.length, name).toBeGreaterThan(0);
      expect(required[name]?.exports, name).toEqual(imported[name]?.exports);
    }
  });

  it('shares one error class between subpaths under require, so instanceof holds', async () => {
    const { stdout } = await node(app, [
      '-e',
      `const { IdempotencyError } = require('drizzle-idempotency');
       const { openSqliteStore } = require('drizzle-idempotency/sqlite');
       const store = openSqliteStore(':memory:');
       try { store.reserve('', 'd', 1); } catch (error) { console.log(error instanceof IdempotencyError, error.code); }
       store.close();`,
    ]);
    expect(stdout.trim()).toBe('true IDEMPOTENCY_INVALID_KEY');
  });

  it('runs the idem executable and prints the package version', async () => {
    const manifest = installedManifest(app);
    const bin = manifest.bin.idem;
    expect(bin).toBeDefined();
    const { stdout } = await node(app, [join(packageDir, bin as string), '--version']);
    expect(stdout.trim()).toBe(manifest.version);
  });

  it('ships its LICENSE, its migrations, and no source map that points outside the tarball', () => {
    expect(readFileSync(join(packageDir, 'LICENSE'), 'utf8')).toMatch(/^MIT License/);
    for (const dialect of ['sqlite', 'pg']) {
      expect(existsSync(join(packageDir, 'drizzle', dialect, 'meta', '_journal.json'))).toBe(true);
    }
    for (const file of filesUnder(join(packageDir, 'dist'))) {
      for (const [, map] of readFileSync(file, 'utf8').matchAll(/sourceMappingURL=(\S+)/g)) {
        expect(existsSync(join(dirname(file), map as string)), `${file} → ${map}`).toBe(true);
      }
    }
  });
});

const SQLITE_CONFIG = `import { defineConfig } from 'drizzle-kit';
export default defineConfig({ dialect: 'sqlite', schema: './src/sqlite-schema.ts', out: './drizzle/sqlite' });
`;

const SQLITE_SCHEMA = `import { integer, sqliteTable, text } from 'drizzle-orm/sqlite-core';
export { keys } from 'drizzle-idempotency/sqlite';
export const orders = sqliteTable('orders', { id: integer('id').primaryKey(), item: text('item').notNull() });
`;

// A CommonJS program of the application: drizzle's own migrator over the generated folder, then
// the store on the same connection, then the library's own opener on the same file.
const SQLITE_FLOW = `
const Database = require('better-sqlite3');
const { eq } = require('drizzle-orm');
const { drizzle } = require('drizzle-orm/better-sqlite3');
const { migrate } = require('drizzle-orm/better-sqlite3/migrator');
const { SqliteIdempotencyStore, keys, openSqliteStore } = require('drizzle-idempotency/sqlite');
const file = process.argv[2];
const db = drizzle(new Database(file));
migrate(db, { migrationsFolder: './drizzle/sqlite' });
const store = new SqliteIdempotencyStore(db);
const reserved = store.reserve('order-1', 'digest-1', 100);
const finished = store.finish('order-1', 'digest-1', { charged: 5 });
const row = db.select().from(keys).where(eq(keys.id, 'order-1')).get();
db.$client.close();
const opened = openSqliteStore(file);
const replayed = opened.fetch('order-1', 50);
const again = opened.reserve('order-1', 'digest-1', 100);
opened.close();
console.log(JSON.stringify({ reserved, finished, row, replayed, again }));
`;

const PG_CONFIG = `import { defineConfig } from 'drizzle-kit';
export default defineConfig({ dialect: 'postgresql', schema: './src/pg-schema.ts', out: './drizzle/pg' });
`;

const PG_SCHEMA = `import { integer, pgTable, text } from 'drizzle-orm/pg-core';
export { keys } from 'drizzle-idempotency/pg';
export const orders = pgTable('orders', { id: integer('id').primaryKey(), item: text('item').notNull() });
`;

// An ES module program of the application, on PGlite: no server needed.
const PG_FLOW = `
import { PGlite } from '@electric-sql/pglite';
import { eq } from 'drizzle-orm';
import { drizzle } from 'drizzle-orm/pglite';
import { migrate } from 'drizzle-orm/pglite/migrator';
import { PgIdempotencyStore, keys } from 'drizzle-idempotency/pg';
const client = new PGlite();
const db = drizzle(client);
await migrate(db, { migrationsFolder: './drizzle/pg' });
const store = new PgIdempotencyStore(db);
const reserved = await store.reserve('order-1', 'digest-1', 100);
const finished = await store.finish('order-1', 'digest-1', { charged: 5 });
const [row] = await db.select().from(keys).where(eq(keys.id, 'order-1'));
const replayed = await store.fetch('order-1', 50);
const again = await store.reserve('order-1', 'digest-1', 100);
await store.close();
await client.close();
console.log(JSON.stringify({ reserved, finished, row, replayed, again }));
`;

const EXPECTED_FLOW = {
  reserved: true,
  finished: true,
  row: {
    id: 'order-1',
    fingerprint: 'digest-1',
    status: 'done',
    response: '{"charged":5}',
    expires: 100,
  },
  replayed: { charged: 5 },
  again: false,
};

function generatedSql(dir: string): string {
  return readdirSync(dir)
    .filter((file) => file.endsWith('.sql'))
    .map((file) => readFileSync(join(dir, file), 'utf8'))
    .join('\n');
}

async function drizzleKitGenerate(config: string): Promise<string> {
  const kit = join(app, 'node_modules', 'drizzle-kit', 'bin.cjs');
  const { stdout, stderr } = await node(app, [kit, 'generate', '--config', config]);
  return stdout + stderr;
}

describe("the application's own drizzle-kit flow over the library's table", () => {
  it('SQLite: generate over a schema re-exporting keys, migrate(), then the store', async () => {
    writeFiles(app, {
      'drizzle.sqlite.config.ts': SQLITE_CONFIG,
      'src/sqlite-schema.ts': SQLITE_SCHEMA,
      'sqlite-flow.cjs': SQLITE_FLOW,
    });
    const printed = await drizzleKitGenerate('drizzle.sqlite.config.ts');
    const migration = generatedSql(join(app, 'drizzle', 'sqlite'));
    expect(migration, printed).toContain('CREATE TABLE `keys`');
    expect(migration).toContain('CREATE INDEX `keys_status_expires_id_idx`');
    expect(migration).toContain('CREATE TABLE `orders`');
    const { stdout } = await node(app, ['sqlite-flow.cjs', join(app, 'app.db')]);
    expect(JSON.parse(stdout)).toEqual(EXPECTED_FLOW);
  });

  it('PostgreSQL: generate over a schema re-exporting keys, migrate(), then the store', async () => {
    writeFiles(app, {
      'drizzle.pg.config.ts': PG_CONFIG,
      'src/pg-schema.ts': PG_SCHEMA,
      'pg-flow.mjs': PG_FLOW,
    });
    const printed = await drizzleKitGenerate('drizzle.pg.config.ts');
    const migration = generatedSql(join(app, 'drizzle', 'pg'));
    expect(migration, printed).toContain('CREATE TABLE "keys"');
    expect(migration).toContain('COLLATE "C"');
    expect(migration).toContain('CREATE INDEX "keys_status_expires_id_idx"');
    const { stdout } = await node(app, ['pg-flow.mjs']);
    expect(JSON.parse(stdout)).toEqual(EXPECTED_FLOW);
  });
});
