import { readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { sql } from 'drizzle-orm';
import { readMigrationFiles } from 'drizzle-orm/migrator';
import { describe, expect, it } from 'vitest';
import { queryRows } from '../../src/pg/client.js';
import { quoteIdentifier } from '../../src/pg/identifier.js';
import {
  type AnyPgDatabase,
  applyPgMigrations,
  PgIdempotencyStore,
  pgKeysTable,
} from '../../src/pg/index.js';
import { appMigrationsFolder, NEWER_THAN_OURS, OLDER_THAN_OURS } from './app-migrations.js';

// The library's committed PostgreSQL migrations, as the repository keeps them.
const pgMigrationsFolder = fileURLToPath(new URL('../../drizzle/pg', import.meta.url));

/** A fresh, empty schema and the application's own migrator, journal in that same schema. */
export interface JournalTarget {
  readonly db: AnyPgDatabase;
  readonly schema: string;
  /** drizzle's `migrate()` of the driver, with `migrationsSchema` set to `schema`. */
  appMigrate(migrationsFolder: string): Promise<void>;
  close(): Promise<void>;
}

const FIXTURE_SCHEMA = 'v010_fixture';

/**
 * Recreates in `schema` the state drizzle-idempotency 0.1.0 left: the pg_dump of a schema it
 * migrated and filled (test/fixtures/v0.1.0/pg-schema.sql), with the schema renamed.
 */
export async function loadV010Schema(db: AnyPgDatabase, schema: string): Promise<void> {
  const dump = readFileSync(new URL('../fixtures/v0.1.0/pg-schema.sql', import.meta.url), 'utf8');
  const statements = dump
    .split('\n')
    .filter((line) => !line.startsWith('--'))
    .join('\n')
    .split(/;\s*\n/)
    .map((statement) => statement.trim())
    .filter((statement) => statement !== '')
    .filter((statement) => !(schema === 'public' && statement.startsWith('CREATE SCHEMA')))
    .map((statement) => statement.replaceAll(`${FIXTURE_SCHEMA}.`, `${quoteIdentifier(schema)}.`));
  for (const statement of statements) await db.execute(sql.raw(statement));
}

// The migration that widened the fencing token to bigint, by its file's tag.
const FENCING_TOKEN_MIGRATION = '0003_fencing_token_bigint';

/**
 * Makes `schema` what the migrations before `tag` left, as a release before it did: their SQL
 * run with the schema on the search path, each recorded in the library's journal.
 */
async function applyMigrationsBefore(db: AnyPgDatabase, schema: string, tag: string) {
  const { entries } = JSON.parse(
    readFileSync(join(pgMigrationsFolder, 'meta', '_journal.json'), 'utf8'),
  ) as { entries: { tag: string; when: number }[] };
  const stop = entries.findIndex((entry) => entry.tag === tag);
  expect(stop).toBeGreaterThan(0);
  const earlier = readMigrationFiles({ migrationsFolder: pgMigrationsFolder }).slice(0, stop);
  const quoted = quoteIdentifier(schema);
  await db.transaction(async (tx) => {
    await tx.execute(sql.raw(`SET LOCAL search_path TO ${quoted}`));
    for (const migration of earlier) {
      for (const statement of migration.sql) await tx.execute(sql.raw(statement));
    }
    await tx.execute(
      sql.raw(
        `CREATE TABLE ${quoted}."__idempotency_migrations" (id SERIAL PRIMARY KEY, hash text NOT NULL, created_at bigint)`,
      ),
    );
    for (const migration of earlier) {
      await tx.execute(
        sql`INSERT INTO ${sql.raw(`${quoted}."__idempotency_migrations"`)} (hash, created_at) VALUES (${migration.hash}, ${migration.folderMillis})`,
      );
    }
  });
}

async function attemptType(db: AnyPgDatabase, schema: string): Promise<string | undefined> {
  const [row] = await queryRows<{ type: string }>(
    db,
    sql`SELECT data_type AS type FROM information_schema.columns
        WHERE table_schema = ${schema} AND table_name = 'keys' AND column_name = 'attempt'`,
  );
  return row?.type;
}

async function tables(db: AnyPgDatabase, schema: string): Promise<string[]> {
  const rows = await queryRows<{ name: string }>(
    db,
    sql`SELECT tablename AS name FROM pg_tables WHERE schemaname = ${schema} ORDER BY tablename`,
  );
  return rows.map((row) => row.name);
}

async function journal(db: AnyPgDatabase, schema: string, table: string) {
  const rows = await queryRows<{ hash: string; created_at: string | number }>(
    db,
    sql.raw(
      `SELECT hash, created_at FROM ${quoteIdentifier(schema)}.${quoteIdentifier(table)} ORDER BY created_at`,
    ),
  );
  return rows.map((row) => ({ hash: row.hash, created_at: Number(row.created_at) }));
}

/** The journal cases of issue 11 on one PostgreSQL driver. */
export function describePgJournal(name: string, fresh: () => Promise<JournalTarget>): void {
  describe(`the library's own migrations journal: ${name}`, () => {
    for (const [age, when] of [
      ['older', OLDER_THAN_OURS],
      ['newer', NEWER_THAN_OURS],
    ] as const) {
      for (const order of ['app first', 'library first'] as const) {
        it(`app migrations ${age} than ours, ${order}, app journal in the store's schema`, async () => {
          const target = await fresh();
          try {
            const { db, schema } = target;
            const folder = appMigrationsFolder(
              tmpdir(),
              'postgresql',
              when,
              `CREATE TABLE ${quoteIdentifier(schema)}."orders" ("id" integer PRIMARY KEY);`,
            );
            const steps = [
              () => target.appMigrate(folder),
              () => applyPgMigrations(db, { schema }),
            ];
            if (order === 'library first') steps.reverse();
            for (const step of [...steps, ...steps]) await step();
            const found = await tables(db, schema);
            expect(found).toContain('orders');
            expect(found).toContain('keys');
            expect(
              (await journal(db, schema, '__drizzle_migrations')).map((r) => r.created_at),
            ).toEqual([when]);
            expect(await journal(db, schema, '__idempotency_migrations')).not.toHaveLength(0);
            const store = new PgIdempotencyStore(db, { schema });
            expect(await store.reserve('k', 'd', 10)).toBe(true);
            await db.execute(sql.raw(`INSERT INTO ${quoteIdentifier(schema)}.orders VALUES (1)`));
          } finally {
            await target.close();
          }
        });
      }
    }

    it('upgrades a schema made by 0.1.0 in place: rows kept, our record copied once, the app journal untouched', async () => {
      const target = await fresh();
      try {
        const { db, schema } = target;
        await loadV010Schema(db, schema);
        const legacy = await journal(db, schema, '__drizzle_migrations');
        expect(legacy).toHaveLength(1);
        for (let open = 0; open < 2; open++) {
          await applyPgMigrations(db, { schema });
          const store = new PgIdempotencyStore<{ receipt: number }>(db, { schema });
          expect(await store.fetch('done-1', 1000)).toEqual({ receipt: 1 });
          expect(await store.reserve('pending-1', 'fp-pending', 1)).toBe(false);
          expect(await store.counts()).toEqual({ pending: 1, done: 2 });
          expect(await store.get('pending-1')).toMatchObject({
            leaseUntil: null,
            fencingToken: 1,
            unrecorded: false,
          });
          expect(
            await store.acquire('pending-1', 'fp-pending', {
              expires: 1,
              now: 3e9,
              leaseSeconds: 1,
            }),
          ).toMatchObject({ status: 'inProgress', leaseUntil: null });
        }
        expect(await journal(db, schema, '__drizzle_migrations')).toEqual(legacy);
        expect((await journal(db, schema, '__idempotency_migrations'))[0]).toEqual(legacy[0]);
      } finally {
        await target.close();
      }
    });

    it('carries over a journal with the serial id of earlier versions: records kept, its sequence gone', async () => {
      const target = await fresh();
      try {
        const { db, schema } = target;
        await applyPgMigrations(db, { schema });
        const store = new PgIdempotencyStore<{ receipt: number }>(db, { schema });
        await store.reserve('done-1', 'fp', 1e10);
        await store.finish('done-1', 'fp', { receipt: 1 });
        const records = await journal(db, schema, '__idempotency_migrations');
        // The journal exactly as the earlier migrators created it, holding the same records.
        const table = `${quoteIdentifier(schema)}.__idempotency_migrations`;
        for (const statement of [
          `CREATE TABLE ${quoteIdentifier(schema)}.old_records AS SELECT hash, created_at FROM ${table}`,
          `DROP TABLE ${table}`,
          `CREATE TABLE ${table} (id SERIAL PRIMARY KEY, hash text NOT NULL, created_at bigint)`,
          `INSERT INTO ${table} (hash, created_at) SELECT hash, created_at FROM ${quoteIdentifier(schema)}.old_records ORDER BY created_at`,
          `DROP TABLE ${quoteIdentifier(schema)}.old_records`,
        ]) {
          await db.execute(sql.raw(statement));
        }
        const sequences = () =>
          queryRows<{ name: string }>(
            db,
            sql`SELECT sequencename AS name FROM pg_sequences WHERE schemaname = ${schema}`,
          );
        expect(await sequences()).toEqual([{ name: '__idempotency_migrations_id_seq' }]);
        for (let open = 0; open < 2; open++) {
          await applyPgMigrations(db, { schema });
          expect(await sequences()).toEqual([]);
          expect(await journal(db, schema, '__idempotency_migrations')).toEqual(records);
          expect(await store.fetch('done-1', 1)).toEqual({ receipt: 1 });
        }
        const columns = await queryRows<{ name: string }>(
          db,
          sql`SELECT column_name AS name FROM information_schema.columns
                WHERE table_schema = ${schema} AND table_name = '__idempotency_migrations' ORDER BY column_name`,
        );
        expect(columns.map((column) => column.name)).toEqual(['created_at', 'hash']);
      } finally {
        await target.close();
      }
    });

    it('upgrades a schema migrated before the fencing-token migration: attempt becomes bigint, tokens kept', async () => {
      const target = await fresh();
      try {
        const { db, schema } = target;
        await applyMigrationsBefore(db, schema, FENCING_TOKEN_MIGRATION);
        expect(await attemptType(db, schema)).toBe('integer');
        const keys = `${quoteIdentifier(schema)}."keys"`;
        // A key held under the old counter (token 2) whose lease lapsed, and a done answer.
        await db.execute(
          sql.raw(`INSERT INTO ${keys} (id, fingerprint, status, response, expires, lease_until, attempt)
            VALUES ('held', 'd', 'pending', NULL, 1000, 50, 2), ('done', 'd', 'done', '{"r":1}', 1000, NULL, 1)`),
        );
        await applyPgMigrations(db, { schema });
        expect(await attemptType(db, schema)).toBe('bigint');
        expect(await journal(db, schema, '__idempotency_migrations')).toHaveLength(5);
        const store = new PgIdempotencyStore(db, { schema });
        expect(await store.get('held')).toMatchObject({ status: 'pending', fencingToken: 2 });
        expect(await store.fetch('done', 100)).toEqual({ r: 1 });
        // The takeover raises the old token past a real-clock one; the old owner is refused.
        const taken = await store.acquire('held', 'd', {
          expires: 1000,
          now: 100,
          leaseSeconds: 30,
        });
        expect(taken).toMatchObject({ status: 'acquired', takenOver: true });
        const token = taken.status === 'acquired' ? taken.fencingToken : 0;
        expect(token).toBeGreaterThan(2 ** 31);
        expect(await store.finish('held', 'd', { by: 'old' }, 2)).toBe(false);
        expect(await store.finish('held', 'd', { by: 'new' }, token)).toBe(true);
        expect(await store.get('held')).toMatchObject({
          fencingToken: token,
          response: { by: 'new' },
        });
        // A fresh claim's token, far past integer's range, is stored and read back exactly.
        const fresh = await store.acquire('new', 'd', {
          expires: 1000,
          now: 100,
          leaseSeconds: 30,
        });
        expect(fresh).toMatchObject({ status: 'acquired', takenOver: false });
        expect((await store.get('new'))?.fencingToken).toBe(
          fresh.status === 'acquired' ? fresh.fencingToken : 0,
        );
      } finally {
        await target.close();
      }
    });

    it("adopts a table the app's drizzle-kit generated with every column, lease columns included", async () => {
      const target = await fresh();
      try {
        const { db, schema } = target;
        await db.execute(
          sql.raw(`CREATE TABLE ${quoteIdentifier(schema)}."keys" ("id" text COLLATE "C" PRIMARY KEY NOT NULL,
            "fingerprint" text NOT NULL, "status" text NOT NULL, "response" text,
            "expires" double precision NOT NULL, "lease_until" double precision,
            "attempt" integer DEFAULT 1 NOT NULL, "unrecorded" boolean DEFAULT false NOT NULL)`),
        );
        await applyPgMigrations(db, { schema });
        await applyPgMigrations(db, { schema });
        const store = new PgIdempotencyStore(db, { schema });
        expect(
          await store.acquire('k', 'd', { expires: 10, now: 1, leaseSeconds: 5 }),
        ).toMatchObject({
          status: 'acquired',
        });
        expect(await journal(db, schema, '__idempotency_migrations')).toHaveLength(5);
        expect(await attemptType(db, schema)).toBe('bigint');
      } finally {
        await target.close();
      }
    });

    it('keeps a renamed table apart in the same schema: its own journal and index names', async () => {
      const target = await fresh();
      try {
        const { db, schema } = target;
        const table = pgKeysTable('idem_keys', { schema });
        await applyPgMigrations(db, { schema });
        await applyPgMigrations(db, { table });
        const first = new PgIdempotencyStore(db, { schema });
        const second = new PgIdempotencyStore(db, { table });
        expect(await first.reserve('k', 'a', 10)).toBe(true);
        expect(await second.reserve('k', 'b', 10)).toBe(true);
        expect((await second.get('k'))?.fingerprint).toBe('b');
        expect(await tables(db, schema)).toEqual(
          expect.arrayContaining([
            '__idempotency_migrations',
            '__idempotency_migrations_idem_keys',
            'idem_keys',
            'keys',
          ]),
        );
        const indexes = await queryRows<{ name: string }>(
          db,
          sql`SELECT indexname AS name FROM pg_indexes WHERE schemaname = ${schema} AND indexname LIKE '%status_expires%' ORDER BY indexname`,
        );
        expect(indexes.map((row) => row.name)).toEqual([
          'idem_keys_status_expires_id_idx',
          'keys_status_expires_id_idx',
        ]);
      } finally {
        await target.close();
      }
    });
  });
}
