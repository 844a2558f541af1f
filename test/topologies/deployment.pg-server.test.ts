import { sql } from 'drizzle-orm';
import { drizzle as drizzlePostgresJs } from 'drizzle-orm/postgres-js';
import postgres from 'postgres';
import { describe, expect, it } from 'vitest';
import { type DeploymentFinding, DeploymentRefusedError } from '../../src/index.js';
import { queryRows } from '../../src/pg/client.js';
import { quoteIdentifier } from '../../src/pg/identifier.js';
import { applyPgMigrations, openPgStore, PgIdempotencyStore } from '../../src/pg/index.js';
import { idem, jsonLine } from '../support/cli.js';
import { freshServerSchema, type ServerSchema, serverUrl } from '../support/pg.js';

const url = serverUrl() as string;

// A session-level setting on connections of the test's own only: the server's settings stay as
// they are.
function withSessionSetting(target: string, setting: string): string {
  const withOptions = new URL(target);
  withOptions.searchParams.set('options', `-c ${setting}`);
  return withOptions.toString();
}

async function withSchema(use: (fresh: ServerSchema) => Promise<void>): Promise<void> {
  const fresh = await freshServerSchema(url, 2);
  try {
    await use(fresh);
  } finally {
    await fresh.drop();
  }
}

// What is in the schema: its relations (tables, indexes, sequences) and the keys table's rows.
async function contents(fresh: ServerSchema): Promise<{ relations: string[]; rows: number }> {
  const relations = await queryRows<{ relname: string }>(
    fresh.db,
    sql`SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
        WHERE n.nspname = ${fresh.schema} ORDER BY c.relname`,
  );
  const [count] = await queryRows<{ n: string }>(
    fresh.db,
    sql.raw(`SELECT count(*) AS n FROM ${quoteIdentifier(fresh.schema)}.keys`),
  );
  return { relations: relations.map((row) => row.relname), rows: Number(count?.n) };
}

describe('the deployment check on PostgreSQL', () => {
  it('refuses a migrated keys table made UNLOGGED, at open, before anything is written', async () => {
    await withSchema(async (fresh) => {
      await applyPgMigrations(fresh.db, { schema: fresh.schema });
      await fresh.pool.query(`ALTER TABLE ${quoteIdentifier(fresh.schema)}.keys SET UNLOGGED`);
      await fresh.pool.query(
        `INSERT INTO ${quoteIdentifier(fresh.schema)}.keys (id, fingerprint, status, expires) VALUES ('k', 'd', 'pending', 1)`,
      );
      const before = await contents(fresh);
      const opening = openPgStore(url, { schema: fresh.schema });
      await expect(opening).rejects.toBeInstanceOf(DeploymentRefusedError);
      const error = (await opening.catch((caught: unknown) => caught)) as DeploymentRefusedError;
      expect(error.code).toBe('IDEMPOTENCY_DEPLOYMENT_REFUSED');
      expect(error.findings).toEqual([
        expect.objectContaining({ level: 'refuse', code: 'unlogged-table' }),
      ]);
      expect(error.message).toContain('SET LOGGED');
      expect(await contents(fresh)).toEqual(before);
    });
  });

  it('refuses a hand-made UNLOGGED table in the adoption check too: no index, no journal written', async () => {
    await withSchema(async (fresh) => {
      await fresh.pool.query(
        `CREATE UNLOGGED TABLE ${quoteIdentifier(fresh.schema)}.keys (id text COLLATE "C" PRIMARY KEY, fingerprint text NOT NULL, status text NOT NULL, response text, expires double precision NOT NULL)`,
      );
      const before = await contents(fresh);
      await expect(applyPgMigrations(fresh.db, { schema: fresh.schema })).rejects.toBeInstanceOf(
        DeploymentRefusedError,
      );
      await expect(openPgStore(url, { schema: fresh.schema })).rejects.toBeInstanceOf(
        DeploymentRefusedError,
      );
      expect(await contents(fresh)).toEqual(before);
    });
  });

  it('hands synchronous_commit = off to onDeploymentWarning at open, and to checkDeployment', async () => {
    await withSchema(async (fresh) => {
      const warnings: DeploymentFinding[] = [];
      const store = await openPgStore(withSessionSetting(url, 'synchronous_commit=off'), {
        schema: fresh.schema,
        poolSize: 1,
        onDeploymentWarning: (finding) => warnings.push(finding),
      });
      try {
        expect(warnings).toEqual([
          expect.objectContaining({
            level: 'warn',
            code: 'synchronous-commit',
            fix: expect.stringContaining('synchronous_commit = on'),
          }),
        ]);
        expect((await store.checkDeployment()).findings).toEqual(warnings);
      } finally {
        await store.close();
      }
    });
  });

  it('finds nothing on the plain server connection', async () => {
    await withSchema(async (fresh) => {
      const warnings: DeploymentFinding[] = [];
      const store = await openPgStore(url, {
        schema: fresh.schema,
        poolSize: 1,
        onDeploymentWarning: (finding) => warnings.push(finding),
      });
      try {
        expect(warnings).toEqual([]);
        expect(await store.checkDeployment()).toEqual({ dialect: 'pg', findings: [] });
      } finally {
        await store.close();
      }
    });
  });

  it('warns when a store with prepare: false runs on a postgres-js client that names its statements', async () => {
    await withSchema(async (fresh) => {
      const naming = postgres(url, { max: 1, onnotice: () => undefined });
      const unnamed = postgres(url, { max: 1, prepare: false, onnotice: () => undefined });
      try {
        const codes = async (client: postgres.Sql, prepare: boolean) =>
          (
            await new PgIdempotencyStore(drizzlePostgresJs({ client }), {
              schema: fresh.schema,
              prepare,
            }).checkDeployment()
          ).findings;
        const findings = await codes(naming, false);
        expect(findings).toEqual([
          expect.objectContaining({
            level: 'warn',
            code: 'pooler',
            fix: 'create the client with postgres(url, { prepare: false })',
          }),
        ]);
        expect(findings[0]?.message).toContain('rolled back without an error');
        // Named statements on both sides, or unnamed on both: nothing to say.
        expect(await codes(naming, true)).toEqual([]);
        expect(await codes(unnamed, false)).toEqual([]);
      } finally {
        await naming.end();
        await unnamed.end();
      }
    });
  });
});

describe('idem doctor on PostgreSQL', () => {
  it('prints the refusal of an UNLOGGED table and exits 1, writing nothing', async () => {
    await withSchema(async (fresh) => {
      await applyPgMigrations(fresh.db, { schema: fresh.schema });
      await fresh.pool.query(`ALTER TABLE ${quoteIdentifier(fresh.schema)}.keys SET UNLOGGED`);
      const before = await contents(fresh);
      const text = await idem(['doctor', '--url', url, '--schema', fresh.schema]);
      expect(text.code).toBe(1);
      expect(text.stdout).toContain('1 refusal, 0 warnings');
      expect(text.stdout).toContain('refuse unlogged-table:');
      expect(text.stdout).toContain('fix: ALTER TABLE');
      const json = await idem(['doctor', '--url', url, '--schema', fresh.schema, '--json']);
      expect(json.code).toBe(1);
      expect(jsonLine(json)).toMatchObject({
        dialect: 'pg',
        findings: [{ level: 'refuse', code: 'unlogged-table' }],
      });
      expect(await contents(fresh)).toEqual(before);
    });
  });

  it('prints the synchronous_commit warning and exits 3; a sound deployment exits 0', async () => {
    await withSchema(async (fresh) => {
      await applyPgMigrations(fresh.db, { schema: fresh.schema });
      const risky = withSessionSetting(url, 'synchronous_commit=off');
      const text = await idem(['doctor', '--url', risky, '--schema', fresh.schema]);
      expect(text.code).toBe(3);
      expect(text.stdout).toContain('0 refusals, 1 warning');
      expect(text.stdout).toContain('warn synchronous-commit: synchronous_commit is off');
      const json = await idem(['doctor', '--url', risky, '--schema', fresh.schema, '--json']);
      expect(json.code).toBe(3);
      expect(jsonLine(json)).toMatchObject({
        dialect: 'pg',
        findings: [{ level: 'warn', code: 'synchronous-commit' }],
      });
      const sound = await idem(['doctor', '--url', url, '--schema', fresh.schema, '--json']);
      expect(sound.code).toBe(0);
      expect(jsonLine(sound)).toMatchObject({ dialect: 'pg', findings: [] });
    });
  });
});
