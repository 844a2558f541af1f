import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { drizzle } from 'drizzle-orm/node-postgres';
import pg from 'pg';
import { beforeAll, describe, expect, it, type TestContext } from 'vitest';
import { freshServerDatabase, serverUrl } from '../support/pg.js';
import { loadV010Schema } from '../support/pg-journal-suite.js';
import { tempDir } from '../support/temp.js';
import { node, packedTarball, scratchApp, writeFiles } from './scratch-app.js';

// drizzle-kit push against databases the library migrated and filled, from the packed package in
// a scratch application: every setup of docs/drizzle-app.md "drizzle-kit push" keeps every row.
let app: string;
let kitProblem: string | undefined;
/** drizzle-kit 1.0 stops where 0.31 prompted or went on: it exits 2 and asks for `--hints`. */
let kitMajor: number;

beforeAll(async () => {
  const work = tempDir('idem-push-');
  app = await scratchApp(join(work, 'app'), await packedTarball());
  try {
    await node(app, [kit(), '--version']);
    const manifest = join(app, 'node_modules', 'drizzle-kit', 'package.json');
    kitMajor = Number(JSON.parse(readFileSync(manifest, 'utf8')).version.split('.')[0]);
  } catch (error) {
    kitProblem = `drizzle-kit does not run: ${String(error)}`;
  }
}, 600_000);

function kit(): string {
  return join(app, 'node_modules', 'drizzle-kit', 'bin.cjs');
}

// In CI drizzle-kit must run; elsewhere a machine without it skips, saying why.
function requireKit(context: TestContext): void {
  if (kitProblem === undefined) return;
  if (process.env.CI === 'true') throw new Error(kitProblem);
  console.warn(`skipped: ${kitProblem}`);
  context.skip();
}

const ORDERS = {
  sqlite: `export const orders = sqliteTable('orders', { id: integer('id').primaryKey(), item: text('item').notNull() });`,
  pg: `export const orders = pgTable('orders', { id: integer('id').primaryKey(), item: text('item').notNull() });`,
};

/** The documented config line for an app schema that leaves the library's tables out. */
const FILTER = `tablesFilter: ['!keys', '!__idempotency_migrations*'],`;

/** The documented config line for the library's tables in a PostgreSQL schema of their own. */
const SCHEMA_FILTER = `schemaFilter: ['public'],`;

let configs = 0;

/** What `drizzle-kit push` printed, and its exit code. */
interface Pushed {
  readonly printed: string;
  readonly code: number;
}

/**
 * Writes an app schema and its drizzle-kit config, runs `drizzle-kit push --force` over it (with
 * `flags` after) and resolves with what drizzle-kit printed and its exit code. drizzle-kit 0.31
 * exits 0 even when it stops at a prompt, so callers judge the output too.
 */
async function push(
  dialect: 'sqlite' | 'pg',
  schema: string,
  credentials: string,
  extra = '',
  flags: readonly string[] = [],
): Promise<Pushed> {
  configs += 1;
  const name = `push-${dialect}-${configs}`;
  const kitDialect = dialect === 'sqlite' ? 'sqlite' : 'postgresql';
  writeFiles(app, {
    [`src/${name}.ts`]: schema,
    [`${name}.config.ts`]: `import { defineConfig } from 'drizzle-kit';
export default defineConfig({ dialect: '${kitDialect}', schema: './src/${name}.ts', ${extra} dbCredentials: { url: ${JSON.stringify(credentials)} } });
`,
  });
  const args = [kit(), 'push', '--config', `${name}.config.ts`, '--force', '--verbose', ...flags];
  try {
    const { stdout, stderr } = await node(app, args);
    return { printed: stdout + stderr, code: 0 };
  } catch (error) {
    const exited = error as { code?: unknown; stdout?: string; stderr?: string };
    if (typeof exited.code !== 'number') throw error;
    return { printed: `${exited.stdout ?? ''}${exited.stderr ?? ''}`, code: exited.code };
  }
}

/** The `--hints` that confirm dropping each non-empty table named: drizzle-kit 1.0's yes. */
function confirmDrops(...tables: string[]): string[] {
  const hints = tables.map((table) => ({
    type: 'confirm_data_loss',
    kind: 'table',
    entity: ['public', table],
  }));
  return ['--hints', JSON.stringify(hints)];
}

/** Pushes twice: the first applies the app's own table, the second must find nothing to do. */
async function pushTwice(...args: Parameters<typeof push>): Promise<void> {
  const first = await push(...args);
  expect(first.printed).not.toMatch(/Error|TTY|prompt|missing_hints/);
  expect(first.code).toBe(0);
  expect(first.printed).toMatch(/CREATE TABLE "orders"|CREATE TABLE `orders`/);
  expect(first.printed).not.toMatch(/keys|__idempotency_migrations|SEQUENCE/i);
  const second = await push(...args);
  expect(second).toEqual({ printed: expect.stringContaining('No changes detected'), code: 0 });
}

// A done answer, a pending claim and the journal: what a running service has.
const SQLITE_SEED = `
const { openSqliteStore, sqliteKeysTable } = require('drizzle-idempotency/sqlite');
const store = openSqliteStore(process.argv[2], { table: sqliteKeysTable(process.argv[3]) });
store.reserve('done-1', 'fp', 1e10);
store.finish('done-1', 'fp', { charged: 5 });
store.reserve('pending-1', 'fp', 1e10);
store.close();
`;

const SQLITE_REPLAY = `
const { openSqliteStore, sqliteKeysTable } = require('drizzle-idempotency/sqlite');
const store = openSqliteStore(process.argv[2], { table: sqliteKeysTable(process.argv[3]) });
console.log(JSON.stringify({ replayed: store.fetch('done-1', 1), again: store.reserve('pending-1', 'fp', 1e10) }));
store.close();
`;

function sqliteState(file: string, name: string) {
  const client = new Database(file, { readonly: true });
  const journal = name === 'keys' ? '__idempotency_migrations' : `__idempotency_migrations_${name}`;
  try {
    return {
      keys: client.prepare(`SELECT * FROM "${name}" ORDER BY id`).all(),
      journal: client.prepare(`SELECT * FROM "${journal}" ORDER BY id`).all(),
      doneIndex: client
        .prepare('SELECT sql FROM sqlite_master WHERE name = ?')
        .get(`${name}_done_id_expires_idx`),
    };
  } finally {
    client.close();
  }
}

// Each case runs drizzle-kit two to four times, each a process of its own that loads the kit: on
// a busy machine that alone can take a minute.
const KIT_CASE = { timeout: 300_000 };

describe('drizzle-kit push over a SQLite database the library migrated', KIT_CASE, () => {
  const SCHEMA = "import { integer, sqliteTable, text } from 'drizzle-orm/sqlite-core';";

  async function seeded(
    name = 'keys',
  ): Promise<{ file: string; before: ReturnType<typeof sqliteState> }> {
    configs += 1;
    const file = join(app, `push-${configs}.db`);
    writeFiles(app, { 'sqlite-seed.cjs': SQLITE_SEED, 'sqlite-replay.cjs': SQLITE_REPLAY });
    await node(app, ['sqlite-seed.cjs', file, name]);
    const before = sqliteState(file, name);
    expect(before.keys).toHaveLength(2);
    expect(before.journal).not.toHaveLength(0);
    return { file, before };
  }

  async function expectKept(
    file: string,
    before: ReturnType<typeof sqliteState>,
    name = 'keys',
  ): Promise<void> {
    expect(sqliteState(file, name)).toEqual(before);
    expect(before.doneIndex).toEqual({ sql: expect.stringContaining("WHERE status = 'done'") });
    const { stdout } = await node(app, ['sqlite-replay.cjs', file, name]);
    expect(JSON.parse(stdout)).toEqual({ replayed: { charged: 5 }, again: false });
  }

  it('re-exported with sqlitePushTables: push changes nothing of ours, twice', async (context) => {
    requireKit(context);
    const { file, before } = await seeded();
    const schema = `${SCHEMA}
import { sqlitePushTables } from 'drizzle-idempotency/sqlite';
export const { keys, journal } = sqlitePushTables();
${ORDERS.sqlite}
`;
    await pushTwice('sqlite', schema, file);
    await expectKept(file, before);
  });

  it('left out, with the tablesFilter line: push keeps every row, twice', async (context) => {
    requireKit(context);
    const { file, before } = await seeded();
    await pushTwice('sqlite', `${SCHEMA}\n${ORDERS.sqlite}\n`, file, FILTER);
    await expectKept(file, before);
  });

  it('a renamed table, re-exported or left out with its name in the line: push keeps every row', async (context) => {
    requireKit(context);
    const name = 'idempotency_keys';
    const reexported = await seeded(name);
    const schema = `${SCHEMA}
import { sqlitePushTables } from 'drizzle-idempotency/sqlite';
export const { keys: idempotencyKeys, journal } = sqlitePushTables('${name}');
${ORDERS.sqlite}
`;
    await pushTwice('sqlite', schema, reexported.file);
    await expectKept(reexported.file, reexported.before, name);
    const leftOut = await seeded(name);
    const filter = `tablesFilter: ['!${name}', '!__idempotency_migrations*'],`;
    await pushTwice('sqlite', `${SCHEMA}\n${ORDERS.sqlite}\n`, leftOut.file, filter);
    await expectKept(leftOut.file, leftOut.before, name);
  });

  // 0.31 drops them at once; 1.0 stops (exit 2) until each drop is confirmed, then drops them.
  it('left out and the line taken away: push --force drops our tables, the case the line prevents', async (context) => {
    requireKit(context);
    const { file, before } = await seeded();
    const schema = `${SCHEMA}\n${ORDERS.sqlite}\n`;
    await pushTwice('sqlite', schema, file, FILTER);
    let pushed = await push('sqlite', schema, file);
    if (kitMajor >= 1) {
      expect(pushed.code).toBe(2);
      expect(pushed.printed).toMatch(/Confirm data loss.*public\.keys/);
      expect(pushed.printed).toMatch(/Confirm data loss.*public\.__idempotency_migrations/);
      expect(sqliteState(file, 'keys')).toEqual(before);
      const hints = confirmDrops('keys', '__idempotency_migrations');
      pushed = await push('sqlite', schema, file, '', hints);
    }
    expect(pushed.code).toBe(0);
    expect(pushed.printed).toContain('DROP TABLE `keys`');
    const client = new Database(file, { readonly: true });
    try {
      const tables = client.prepare("SELECT name FROM sqlite_master WHERE type = 'table'").all();
      expect(tables).toEqual([{ name: 'orders' }]);
    } finally {
      client.close();
    }
  });
});

// The 0.1.0 fixture holds done-1 (answer { receipt: 1 }) and pending-1.
const PG_OPEN = `
import { openPgStore } from 'drizzle-idempotency/pg';
const store = await openPgStore(process.argv[2], { poolSize: 1 });
console.log(JSON.stringify(await store.fetch('done-1', 1000)));
await store.close();
`;

const PG_SEED = `
import { openPgStore } from 'drizzle-idempotency/pg';
const [url, schema] = process.argv.slice(2);
const store = await openPgStore(url, { schema, poolSize: 1 });
await store.reserve('done-1', 'fp', 1e10);
await store.finish('done-1', 'fp', { charged: 5 });
await store.reserve('pending-1', 'fp', 1e10);
console.log(JSON.stringify({ replayed: await store.fetch('done-1', 1), again: await store.reserve('pending-1', 'fp', 1e10) }));
await store.close();
`;

async function pgState(url: string, schema: string) {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    const query = async (text: string) => (await client.query(text)).rows;
    return {
      keys: await query(`SELECT * FROM "${schema}".keys ORDER BY id`),
      journal: await query(
        `SELECT * FROM "${schema}".__idempotency_migrations ORDER BY created_at`,
      ),
      idCollation: await query(
        `SELECT collation_name FROM information_schema.columns
          WHERE table_schema = '${schema}' AND table_name = 'keys' AND column_name = 'id'`,
      ),
      sequences: await query('SELECT sequencename FROM pg_sequences'),
    };
  } finally {
    await client.end();
  }
}

const url = serverUrl();
if (url === undefined) {
  console.warn('DATABASE_URL is not set: drizzle-kit push is not run on the PostgreSQL server.');
}

describe.runIf(url !== undefined)(
  'drizzle-kit push over a PostgreSQL database the library migrated',
  KIT_CASE,
  () => {
    const SCHEMA = "import { integer, pgTable, text } from 'drizzle-orm/pg-core';";

    // A database of its own: push works on `public` by default, as an app's would.
    async function withSeeded(
      schema: string,
      body: (database: string, before: Awaited<ReturnType<typeof pgState>>) => Promise<void>,
    ): Promise<void> {
      const database = await freshServerDatabase(url as string);
      try {
        writeFiles(app, { 'pg-seed.mjs': PG_SEED });
        await node(app, ['pg-seed.mjs', database.url, schema]);
        const before = await pgState(database.url, schema);
        expect(before.keys).toHaveLength(2);
        expect(before.journal).not.toHaveLength(0);
        expect(before.idCollation).toEqual([{ collation_name: 'C' }]);
        expect(before.sequences).toEqual([]);
        await body(database.url, before);
        expect(await pgState(database.url, schema)).toEqual(before);
        const { stdout } = await node(app, ['pg-seed.mjs', database.url, schema]);
        expect(JSON.parse(stdout)).toEqual({ replayed: { charged: 5 }, again: false });
      } finally {
        await database.drop();
      }
    }

    it('re-exported with pgPushTables: push changes nothing of ours, twice', async (context) => {
      requireKit(context);
      await withSeeded('public', async (database) => {
        const schema = `${SCHEMA}
import { pgPushTables } from 'drizzle-idempotency/pg';
export const { keys, journal } = pgPushTables();
${ORDERS.pg}
`;
        await pushTwice('pg', schema, database);
      });
    });

    it('left out, with the tablesFilter line: no sequence in the way, every row kept', async (context) => {
      requireKit(context);
      await withSeeded('public', async (database) => {
        await pushTwice('pg', `${SCHEMA}\n${ORDERS.pg}\n`, database, FILTER);
      });
    });

    // 0.1.0 recorded its migration in drizzle's __drizzle_migrations (a serial id) in the store's
    // schema, and newer versions leave that table as it is: push trips on its sequence as it did
    // on our journal's. The documented step: once opened by this version, drop it.
    it('left out, on a database made by 0.1.0: after the documented DROP, every row kept', async (context) => {
      requireKit(context);
      const database = await freshServerDatabase(url as string);
      const pool = new pg.Pool({ connectionString: database.url, max: 1 });
      try {
        await loadV010Schema(drizzle({ client: pool }), 'public');
        writeFiles(app, { 'pg-open.mjs': PG_OPEN });
        const open = async () =>
          JSON.parse((await node(app, ['pg-open.mjs', database.url])).stdout);
        expect(await open()).toEqual({ receipt: 1 });
        const schema = `${SCHEMA}\n${ORDERS.pg}\n`;
        const untouched = await pgState(database.url, 'public');
        const blocked = await push('pg', schema, database.url, FILTER);
        // 0.31 stops at a prompt over the table's sequence and exits 0; 1.0 sees the table itself
        // and asks (exit 2) whether `orders` is that table renamed.
        expect(blocked).toEqual(
          kitMajor >= 1
            ? { printed: expect.stringMatching(/missing_hints/), code: 2 }
            : { printed: expect.stringMatching(/TTY|__drizzle_migrations/), code: 0 },
        );
        expect(await pgState(database.url, 'public')).toEqual(untouched);
        await pool.query('DROP TABLE "__drizzle_migrations"');
        const before = await pgState(database.url, 'public');
        expect(before.keys).toHaveLength(3);
        await pushTwice('pg', schema, database.url, FILTER);
        expect(await pgState(database.url, 'public')).toEqual(before);
        expect(await open()).toEqual({ receipt: 1 });
        expect(await pgState(database.url, 'public')).toEqual(before);
      } finally {
        await pool.end();
        await database.drop();
      }
    });

    it("left out, the library's tables in their own schema: push leaves them alone", async (context) => {
      requireKit(context);
      await withSeeded('idempotency', async (database) => {
        // drizzle-kit 1.0 manages every schema unless told otherwise; 0.31 only public.
        await pushTwice('pg', `${SCHEMA}\n${ORDERS.pg}\n`, database, SCHEMA_FILTER);
      });
    });
  },
);
