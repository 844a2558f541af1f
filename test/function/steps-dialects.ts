// The step suite's harnesses on PostgreSQL and MySQL: a store in a schema (or database) of its
// own with a ledger table beside it.
import { sql } from 'drizzle-orm';
import { type MysqlIdempotencyStore, openMysqlStore } from '../../src/mysql/index.js';
import { mysqlSteps } from '../../src/mysql/steps.js';
import type { MysqlHandlerTransaction } from '../../src/mysql/transaction.js';
import { queryRows } from '../../src/pg/client.js';
import { quoteIdentifier } from '../../src/pg/identifier.js';
import {
  type AnyPgDatabase,
  applyPgMigrations,
  PgIdempotencyStore,
  pgSteps,
} from '../../src/pg/index.js';
import type { PgHandlerTransaction } from '../../src/pg/transaction.js';
import { freshMysqlDatabase } from '../support/mysql.js';
import { uniqueName } from '../support/pg.js';
import type { StepsHarness } from './steps-suite.js';

/** A migrated store in a fresh schema of `db`, with a ledger table in that schema. */
export async function pgStepsHarness(
  db: AnyPgDatabase,
  done: () => Promise<void> = async () => undefined,
): Promise<StepsHarness<PgHandlerTransaction>> {
  const schema = uniqueName('st');
  const quoted = quoteIdentifier(schema);
  await db.execute(sql.raw(`CREATE SCHEMA ${quoted}`));
  await applyPgMigrations(db, { schema });
  await db.execute(sql.raw(`CREATE TABLE ${quoted}.ledger (id text NOT NULL)`));
  const store = new PgIdempotencyStore(db, { schema });
  const others: PgIdempotencyStore<unknown>[] = [];
  return {
    store,
    steps: (options) => pgSteps(store, options),
    ledger: (tx, id) => tx.execute(sql`INSERT INTO ${sql.raw(quoted)}.ledger (id) VALUES (${id})`),
    ledgerRows: async (id) => {
      const [row] = await queryRows<{ n: string | number }>(
        db,
        sql`SELECT count(*) AS n FROM ${sql.raw(quoted)}.ledger WHERE id = ${id}`,
      );
      return Number(row?.n);
    },
    stepsColumn: async (key) => {
      const [row] = await queryRows<{ steps: string | null }>(
        db,
        sql`SELECT steps FROM ${sql.raw(quoted)}.keys WHERE id = ${key}`,
      );
      return row?.steps ?? null;
    },
    reopen: async (encryption) => {
      const other = new PgIdempotencyStore(db, {
        schema,
        ...(encryption === undefined ? {} : { encryption }),
      });
      others.push(other);
      return { store: other, steps: (options) => pgSteps(other, options) };
    },
    close: async () => {
      for (const other of others) await other.close();
      await store.close();
      await db.execute(sql.raw(`DROP SCHEMA ${quoted} CASCADE`));
      await done();
    },
  };
}

/** A migrated store in a fresh database on the server at `url`, with a ledger table in it. */
export async function mysqlStepsHarness(
  url: string,
): Promise<StepsHarness<MysqlHandlerTransaction>> {
  const database = await freshMysqlDatabase(url);
  await database.pool.query('CREATE TABLE ledger (id varchar(64) NOT NULL)');
  const store = await openMysqlStore(database.url);
  const others: MysqlIdempotencyStore<unknown>[] = [];
  return {
    store,
    steps: (options) => mysqlSteps(store, options),
    ledger: (tx, id) => tx.execute(sql`INSERT INTO ledger (id) VALUES (${id})`),
    ledgerRows: async (id) => {
      const [rows] = (await database.pool.query('SELECT count(*) AS n FROM ledger WHERE id = ?', [
        id,
      ])) as unknown as [{ n: number }[]];
      return Number(rows[0]?.n);
    },
    stepsColumn: async (key) => {
      const [rows] = (await database.pool.query('SELECT steps FROM `keys` WHERE id = ?', [
        key,
      ])) as unknown as [{ steps: string | null }[]];
      return rows[0]?.steps ?? null;
    },
    reopen: async (encryption) => {
      // Small pools: the suite opens several stores on a server other suites share.
      const other = await openMysqlStore(database.url, {
        poolSize: 2,
        ...(encryption === undefined ? {} : { encryption }),
      });
      others.push(other);
      return { store: other, steps: (options) => mysqlSteps(other, options) };
    },
    close: async () => {
      for (const other of others) await other.close();
      await store.close();
      await database.drop();
    },
  };
}
