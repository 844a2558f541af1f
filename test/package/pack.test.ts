import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { freshServerDatabase, serverUrl } from '../support/pg.js';
import { tempDir } from '../support/temp.js';
import {
  installedManifest,
  node,
  packedTarball,
  repoRoot,
  scratchApp,
  writeFiles,
} from './scratch-app.js';

// The one tarball the whole test run shares (see packedTarball): the build is the slow part.
let app: string;
let packageDir: string;

beforeAll(async () => {
  const work = tempDir('idem-pack-');
  const tarball = await packedTarball();
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

// What each entry must not export: the root is the core only (the HTTP layer and the function
// wrapper have their own subpaths), and no entry exports the library's internals.
const NOT_EXPORTED: Record<string, string[]> = {
  'drizzle-idempotency': [
    'idempotent',
    'makeIdempotent',
    'requestFingerprint',
    'KeyReusedError',
    'countByStatus',
    'validateSweepOptions',
    'parseResponse',
    'serializeResponse',
  ],
  'drizzle-idempotency/http': ['toWire', 'canonicalJson', 'fingerprintBody'],
  'drizzle-idempotency/pg': ['quoteIdentifier', 'assertSchemaName'],
  'drizzle-idempotency/mysql': [
    'ER_DUP_ENTRY',
    'ER_LOCK_DEADLOCK',
    'mysqlErrno',
    'mysqlDeploymentFindings',
  ],
};

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
    for (const [name, left] of Object.entries(NOT_EXPORTED)) {
      for (const internal of left) expect(required[name]?.exports, name).not.toContain(internal);
    }
    expect(required['drizzle-idempotency']?.exports).toEqual(
      expect.arrayContaining(['IdempotencyError', 'InvalidLimitError', 'KeyStatus', 'sweep']),
    );
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

  it('starts the SQLite worker store from the installed package, under require and import', async () => {
    const script = (load: string) => `${load}
      const dir = require('node:fs').mkdtempSync(require('node:path').join(require('node:os').tmpdir(), 'idem-pack-worker-'));
      (async () => {
        const store = await openSqliteWorkerStore(require('node:path').join(dir, 'keys.db'));
        const reserved = await store.reserve('k', 'd', 1e12);
        const refused = await openSqliteWorkerStore(require('node:path').join(dir, 'no', 'x.db')).catch((error) => error.code);
        await store.close();
        console.log(reserved, refused, store.closed);
      })();`;
    const required = await node(app, [
      '-e',
      script("const { openSqliteWorkerStore } = require('drizzle-idempotency/sqlite');"),
    ]);
    const imported = await node(app, [
      '--input-type=module',
      '-e',
      script(
        "import { createRequire } from 'node:module'; const require = createRequire(import.meta.url); const { openSqliteWorkerStore } = await import('drizzle-idempotency/sqlite');",
      ),
    ]);
    for (const { stdout } of [required, imported]) {
      expect(stdout.trim()).toBe('true IDEMPOTENCY_DATABASE_OPEN true');
    }
  });

  it('records a store span through the installed /observe, under require and import', async () => {
    // The ES module build once found the bundler's throwing stand-in for require, took the
    // OpenTelemetry API for absent and recorded nothing; the sources never showed it.
    const script = (load: string) => `${load}
      const exporter = new InMemorySpanExporter();
      const tracerProvider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
      const store = instrumentStore(openSqliteStore(':memory:'), { dialect: 'sqlite', tracerProvider });
      store.get('k');
      store.close();
      console.log(exporter.getFinishedSpans().map((span) => span.name).join(','));`;
    const required = await node(app, [
      '-e',
      script(`const { instrumentStore } = require('drizzle-idempotency/observe');
        const { openSqliteStore } = require('drizzle-idempotency/sqlite');
        const { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor } = require('@opentelemetry/sdk-trace-base');`),
    ]);
    const imported = await node(app, [
      '--input-type=module',
      '-e',
      script(`import { instrumentStore } from 'drizzle-idempotency/observe';
        import { openSqliteStore } from 'drizzle-idempotency/sqlite';
        import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-base';`),
    ]);
    for (const { stdout } of [required, imported]) {
      expect(stdout.trim()).toBe('idempotency.store.get,idempotency.store.close');
    }
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
    const dialects = readdirSync(join(repoRoot, 'drizzle'));
    expect(dialects).toEqual(expect.arrayContaining(['sqlite', 'pg']));
    for (const dialect of dialects) {
      const journal = join(packageDir, 'drizzle', dialect, 'meta', '_journal.json');
      expect(existsSync(journal), journal).toBe(true);
    }
    for (const file of filesUnder(join(packageDir, 'dist'))) {
      for (const [, map] of readFileSync(file, 'utf8').matchAll(/sourceMappingURL=(\S+)/g)) {
        expect(existsSync(join(dirname(file), map as string)), `${file} → ${map}`).toBe(true);
      }
    }
  });
});

/** One run of the application's drizzle-kit flow: a dialect, and the keys table's name. */
interface Flow {
  dialect: 'sqlite' | 'pg';
  /** The keys table's name; `keys` is the library's default table, re-exported as is. */
  table: string;
}

function schemaOf({ dialect, table }: Flow): string {
  if (dialect === 'sqlite') {
    const keysTable =
      table === 'keys'
        ? "export { keys } from 'drizzle-idempotency/sqlite';"
        : // The application's own table already holds the name `keys` (its API keys).
          `import { sqliteKeysTable } from 'drizzle-idempotency/sqlite';
export const keys = sqliteTable('keys', { id: integer('id').primaryKey(), owner: text('owner').notNull() });
export const idempotencyKeys = sqliteKeysTable('${table}');`;
    return `import { integer, sqliteTable, text } from 'drizzle-orm/sqlite-core';
${keysTable}
export const orders = sqliteTable('orders', { id: integer('id').primaryKey(), item: text('item').notNull() });
`;
  }
  const keysTable =
    table === 'keys'
      ? "export { keys } from 'drizzle-idempotency/pg';"
      : // drizzle-kit creates only the schemas the schema file exports.
        `import { pgKeysTable } from 'drizzle-idempotency/pg';
export const billing = pgSchema('billing');
export const keys = pgTable('keys', { id: integer('id').primaryKey(), owner: text('owner').notNull() });
export const idempotencyKeys = pgKeysTable('${table}', { schema: 'billing' });`;
  return `import { integer, pgSchema, pgTable, text } from 'drizzle-orm/pg-core';
${keysTable}
export const orders = pgTable('orders', { id: integer('id').primaryKey(), item: text('item').notNull() });
`;
}

function configOf({ dialect, table }: Flow): string {
  const kitDialect = dialect === 'sqlite' ? 'sqlite' : 'postgresql';
  return `import { defineConfig } from 'drizzle-kit';
export default defineConfig({ dialect: '${kitDialect}', schema: './src/${dialect}-${table}.ts', out: './drizzle/${dialect}-${table}' });
`;
}

// A CommonJS program of the application: drizzle's own migrator over the generated folder, then
// the store on the same connection, then the library's own opener (and migrator) on the same file.
const SQLITE_FLOW = `
const Database = require('better-sqlite3');
const { eq } = require('drizzle-orm');
const { drizzle } = require('drizzle-orm/better-sqlite3');
const { migrate } = require('drizzle-orm/better-sqlite3/migrator');
const { SqliteIdempotencyStore, sqliteKeysTable, openSqliteStore } = require('drizzle-idempotency/sqlite');
const [file, migrationsFolder, name] = process.argv.slice(2);
const table = sqliteKeysTable(name);
const db = drizzle({ client: new Database(file) });
migrate(db, { migrationsFolder });
const store = new SqliteIdempotencyStore(db, { table });
const reserved = store.reserve('order-1', 'fingerprint-1', 100);
const finished = store.finish('order-1', 'fingerprint-1', { charged: 5 });
const row = db.select().from(table).where(eq(table.id, 'order-1')).get();
db.$client.close();
const opened = openSqliteStore(file, { table });
const replayed = opened.fetch('order-1', 50);
const again = opened.reserve('order-1', 'fingerprint-1', 100);
opened.close();
console.log(JSON.stringify({ reserved, finished, row, replayed, again }));
`;

// An ES module program of the application, on PGlite (no server needed): drizzle's migrator, the
// store, then the library's own migrator on the same database.
const PG_FLOW = `
import { PGlite } from '@electric-sql/pglite';
import { eq } from 'drizzle-orm';
import { drizzle } from 'drizzle-orm/pglite';
import { migrate } from 'drizzle-orm/pglite/migrator';
import { applyPgMigrations, PgIdempotencyStore, pgKeysTable } from 'drizzle-idempotency/pg';
const [migrationsFolder, name] = process.argv.slice(2);
const table = name === 'keys' ? pgKeysTable() : pgKeysTable(name, { schema: 'billing' });
const client = new PGlite();
const db = drizzle({ client });
await migrate(db, { migrationsFolder });
await applyPgMigrations(db, { table });
const store = new PgIdempotencyStore(db, { table });
const reserved = await store.reserve('order-1', 'fingerprint-1', 100);
const finished = await store.finish('order-1', 'fingerprint-1', { charged: 5 });
const [row] = await db.select().from(table).where(eq(table.id, 'order-1'));
const replayed = await store.fetch('order-1', 50);
const again = await store.reserve('order-1', 'fingerprint-1', 100);
await store.close();
await client.close();
console.log(JSON.stringify({ reserved, finished, row, replayed, again }));
`;

const EXPECTED_FLOW = {
  reserved: true,
  finished: true,
  row: {
    id: 'order-1',
    fingerprint: 'fingerprint-1',
    status: 'done',
    response: '{"charged":5}',
    expires: 100,
    // Made by reserve, which takes no lease: attempt 1, never taken over automatically.
    leaseUntil: null,
    attempt: 1,
    unrecorded: false,
    steps: null,
  },
  replayed: { charged: 5 },
  again: false,
};

// drizzle-kit 0.31 writes `0000_name.sql` files; 1.0 a folder per migration holding its SQL.
function generatedSql(dir: string): string {
  return readdirSync(dir, { recursive: true, encoding: 'utf8' })
    .filter((file) => file.endsWith('.sql'))
    .sort()
    .map((file) => readFileSync(join(dir, file), 'utf8'))
    .join('\n');
}

async function drizzleKitGenerate(config: string): Promise<string> {
  const kit = join(app, 'node_modules', 'drizzle-kit', 'bin.cjs');
  const { stdout, stderr } = await node(app, [kit, 'generate', '--config', config]);
  return stdout + stderr;
}

const FLOWS: Flow[] = [
  { dialect: 'sqlite', table: 'keys' },
  { dialect: 'sqlite', table: 'idempotency_keys' },
  { dialect: 'pg', table: 'keys' },
  { dialect: 'pg', table: 'idempotency_keys' },
];

// Writes the flow's schema and config into the application and runs drizzle-kit generate over
// them; resolves with the folder of the generated migrations and what drizzle-kit printed.
async function generate(flow: Flow): Promise<{ out: string; printed: string }> {
  const { dialect, table } = flow;
  const config = `drizzle.${dialect}-${table}.config.ts`;
  writeFiles(app, { [config]: configOf(flow), [`src/${dialect}-${table}.ts`]: schemaOf(flow) });
  const printed = await drizzleKitGenerate(config);
  return { out: join(app, 'drizzle', `${dialect}-${table}`), printed };
}

describe("the application's own drizzle-kit flow over the library's table", () => {
  it.each(FLOWS)('$dialect, table $table: generate, migrate(), then the store', async (flow) => {
    const { dialect, table } = flow;
    writeFiles(app, { 'sqlite-flow.cjs': SQLITE_FLOW, 'pg-flow.mjs': PG_FLOW });
    const { out, printed } = await generate(flow);
    const migration = generatedSql(out);
    const q = dialect === 'sqlite' ? '`' : '"';
    const qualified = dialect === 'pg' && table !== 'keys' ? `${q}billing${q}.` : '';
    expect(migration, printed).toContain(`CREATE TABLE ${qualified}${q}${table}${q}`);
    expect(migration).toContain(`CREATE INDEX ${q}${table}_status_expires_id_idx${q}`);
    expect(migration).toContain(`CREATE TABLE ${q}orders${q}`);
    if (dialect === 'pg') expect(migration).toContain('COLLATE "C"');
    const { stdout } =
      dialect === 'sqlite'
        ? await node(app, ['sqlite-flow.cjs', join(app, `${table}.db`), out, table])
        : await node(app, ['pg-flow.mjs', out, table]);
    expect(JSON.parse(stdout)).toEqual(EXPECTED_FLOW);
  });
});

// The same flow on the real server, through the two drivers an application picks: node-postgres
// from an ES module, postgres-js from CommonJS. Each works in a database of its own, so the
// default `keys` table and drizzle's default journal schema are used exactly as an app would.
const SERVER_FLOW_NODE_PG = `
import { eq } from 'drizzle-orm';
import { drizzle } from 'drizzle-orm/node-postgres';
import { migrate } from 'drizzle-orm/node-postgres/migrator';
import pg from 'pg';
import { keys, openPgStore, PgIdempotencyStore } from 'drizzle-idempotency/pg';
const [url, migrationsFolder] = process.argv.slice(2);
const pool = new pg.Pool({ connectionString: url, max: 2 });
const db = drizzle({ client: pool });
await migrate(db, { migrationsFolder });
const store = new PgIdempotencyStore(db);
const reserved = await store.reserve('order-1', 'fingerprint-1', 100);
const finished = await store.finish('order-1', 'fingerprint-1', { charged: 5 });
const [row] = await db.select().from(keys).where(eq(keys.id, 'order-1'));
await pool.end();
const opened = await openPgStore(url, { poolSize: 1 });
const replayed = await opened.fetch('order-1', 50);
const again = await opened.reserve('order-1', 'fingerprint-1', 100);
await opened.close();
console.log(JSON.stringify({ reserved, finished, row, replayed, again }));
`;

const SERVER_FLOW_POSTGRES_JS = `
const { eq } = require('drizzle-orm');
const { drizzle } = require('drizzle-orm/postgres-js');
const { migrate } = require('drizzle-orm/postgres-js/migrator');
const postgres = require('postgres');
const { applyPgMigrations, keys, PgIdempotencyStore } = require('drizzle-idempotency/pg');
const [url, migrationsFolder] = process.argv.slice(2);
(async () => {
  const client = postgres(url, { max: 2, onnotice: () => {} });
  const db = drizzle({ client });
  await migrate(db, { migrationsFolder });
  await applyPgMigrations(db);
  const store = new PgIdempotencyStore(db);
  const reserved = await store.reserve('order-1', 'fingerprint-1', 100);
  const finished = await store.finish('order-1', 'fingerprint-1', { charged: 5 });
  const [row] = await db.select().from(keys).where(eq(keys.id, 'order-1'));
  const replayed = await store.fetch('order-1', 50);
  const again = await store.reserve('order-1', 'fingerprint-1', 100);
  await client.end();
  console.log(JSON.stringify({ reserved, finished, row, replayed, again }));
})();
`;

const url = serverUrl();
if (url === undefined) {
  console.warn('DATABASE_URL is not set: the packed package is not run on the PostgreSQL server.');
}

describe.runIf(url !== undefined)(
  "the application's drizzle-kit flow on the PostgreSQL server",
  () => {
    it.each([
      { driver: 'node-postgres', script: 'server-node-pg.mjs', text: SERVER_FLOW_NODE_PG },
      { driver: 'postgres-js', script: 'server-postgres-js.cjs', text: SERVER_FLOW_POSTGRES_JS },
    ])('$driver: generate, migrate(), then the store', async ({ script, text }) => {
      writeFiles(app, { [script]: text });
      const { out } = await generate({ dialect: 'pg', table: 'keys' });
      const database = await freshServerDatabase(url as string);
      try {
        const { stdout } = await node(app, [script, database.url, out]);
        expect(JSON.parse(stdout)).toEqual(EXPECTED_FLOW);
      } finally {
        await database.drop();
      }
    });
  },
);
