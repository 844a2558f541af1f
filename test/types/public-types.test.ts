// Pins the public types. The `expectTypeOf` assertions are checked by the compiler
// (`npm run typecheck`, and the docs typecheck in test/package/docs-snippets.test.ts, which
// compiles this folder too); the runtime assertions check that the values agree with them.
import Database from 'better-sqlite3';
import { getTableName } from 'drizzle-orm';
import { drizzle } from 'drizzle-orm/better-sqlite3';
import { getTableConfig } from 'drizzle-orm/pg-core';
import { describe, expect, expectTypeOf, it } from 'vitest';
import type * as fn from '../../src/function/index.js';
import type * as express from '../../src/http/express.js';
import type { IdempotentResult } from '../../src/http/index.js';
import * as http from '../../src/http/index.js';
import type {
  AcquireResult,
  IdempotencyRecord,
  IdempotencyStore,
  JsonValue,
  KeyStatus,
  LeasedIdempotencyStore,
  LeaseState,
  MaybePromise,
  StatusCounts,
  SweepStop,
} from '../../src/index.js';
import * as root from '../../src/index.js';
import type { LibsqlIdempotencyStore } from '../../src/libsql/index.js';
import {
  type PgIdempotencyStore,
  type PgStoreOptions,
  type keys as pgKeys,
  pgKeysTable,
} from '../../src/pg/index.js';
import {
  applySqliteMigrations,
  keys,
  type OpenSqliteStoreOptions,
  openSqliteStore,
  SqliteIdempotencyStore,
  type SqliteStoreOptions,
  sqliteKeysTable,
  type sqliteSteps,
} from '../../src/sqlite/index.js';

type SqliteSteps = ReturnType<typeof sqliteSteps>;

interface Receipt {
  charged: number;
}

/** The row of the contract, as drizzle infers it from either dialect's table. */
interface KeyRow {
  id: string;
  fingerprint: string;
  status: KeyStatus;
  response: string | null;
  expires: number;
  leaseUntil: number | null;
  attempt: number;
  unrecorded: boolean;
  steps: string | null;
}

describe('the public types', () => {
  it('fetch returns T | null on the synchronous SQLite store', () => {
    const store = openSqliteStore<Receipt>(':memory:');
    expectTypeOf(store.fetch).returns.toEqualTypeOf<Receipt | null>();
    expectTypeOf(store.reserve).returns.toEqualTypeOf<boolean>();
    expectTypeOf(store.counts).returns.toEqualTypeOf<StatusCounts>();
    expect(store.reserve('k', 'd', 10)).toBe(true);
    expect(store.fetch('k', 0)).toBeNull();
    expect(store.finish('k', 'd', { charged: 5 })).toBe(true);
    const answer = store.fetch('k', 0);
    expectTypeOf(answer).toEqualTypeOf<Receipt | null>();
    expect(answer).toEqual({ charged: 5 });
    store.close();
  });

  it('fetch returns a Promise of T | null on the async stores; the interface allows both', () => {
    expectTypeOf<PgIdempotencyStore<Receipt>['fetch']>().returns.toEqualTypeOf<
      Promise<Receipt | null>
    >();
    expectTypeOf<PgIdempotencyStore<Receipt>['get']>().returns.toEqualTypeOf<
      Promise<IdempotencyRecord<Receipt> | null>
    >();
    expectTypeOf<LibsqlIdempotencyStore<Receipt>['fetch']>().returns.toEqualTypeOf<
      Promise<Receipt | null>
    >();
    expectTypeOf<IdempotencyStore<Receipt>['fetch']>().returns.toEqualTypeOf<
      MaybePromise<Receipt | null>
    >();
    expectTypeOf<SqliteIdempotencyStore<Receipt>>().toExtend<IdempotencyStore<Receipt>>();
    expectTypeOf<PgIdempotencyStore<Receipt>>().toExtend<IdempotencyStore<Receipt>>();
    expectTypeOf<LibsqlIdempotencyStore<Receipt>>().toExtend<IdempotencyStore<Receipt>>();
    // A store of one answer type is not a store of another.
    expectTypeOf<SqliteIdempotencyStore<Receipt>>().not.toExtend<IdempotencyStore<string>>();
    expect(typeof SqliteIdempotencyStore).toBe('function');
  });

  it("the tables' $inferSelect is the row of the contract", () => {
    expectTypeOf<typeof keys.$inferSelect>().toEqualTypeOf<KeyRow>();
    expectTypeOf<typeof pgKeys.$inferSelect>().toEqualTypeOf<KeyRow>();
    const client = new Database(':memory:');
    const db = drizzle({ client });
    applySqliteMigrations(db);
    const store = new SqliteIdempotencyStore<JsonValue>(db);
    store.reserve('k', 'd', 10);
    const rows = db.select().from(keys).all();
    expectTypeOf(rows).toEqualTypeOf<KeyRow[]>();
    expect(rows).toEqual([
      {
        id: 'k',
        fingerprint: 'd',
        status: 'pending',
        response: null,
        expires: 10,
        leaseUntil: null,
        attempt: 1,
        unrecorded: false,
        steps: null,
      },
    ]);
    client.close();
  });

  it('a renamed table keeps the row type and its name, and goes to its own dialect only', () => {
    const sqliteTable = sqliteKeysTable('idempotency_keys');
    const pgTable = pgKeysTable('idempotency_keys', { schema: 'billing' });
    expectTypeOf<typeof sqliteTable.$inferSelect>().toEqualTypeOf<KeyRow>();
    expectTypeOf<typeof pgTable.$inferSelect>().toEqualTypeOf<KeyRow>();
    expectTypeOf<(typeof sqliteTable)['_']['name']>().toEqualTypeOf<'idempotency_keys'>();
    expectTypeOf({ table: sqliteTable }).toExtend<SqliteStoreOptions>();
    expectTypeOf({ table: sqliteTable }).toExtend<OpenSqliteStoreOptions>();
    expectTypeOf({ table: pgTable }).toExtend<PgStoreOptions>();
    expectTypeOf({ table: pgTable }).not.toExtend<SqliteStoreOptions>();
    expectTypeOf({ table: sqliteTable }).not.toExtend<PgStoreOptions>();
    expect(getTableName(sqliteTable)).toBe('idempotency_keys');
    expect(getTableConfig(pgTable).schema).toBe('billing');
  });

  it('store options accept their documented fields and refuse wrong ones', () => {
    expectTypeOf({ onClose: () => undefined, answerCacheSize: 100 }).toExtend<SqliteStoreOptions>();
    expectTypeOf<{ onClose: 'yes' }>().not.toExtend<SqliteStoreOptions>();
    expectTypeOf<{ answerCacheSize: string }>().not.toExtend<SqliteStoreOptions>();
    expectTypeOf({
      busyTimeoutMs: 1000,
      synchronous: 'FULL' as const,
    }).toExtend<OpenSqliteStoreOptions>();
    expectTypeOf<{ synchronous: 'SOMETIMES' }>().not.toExtend<OpenSqliteStoreOptions>();
    expectTypeOf({ schema: 'billing', onClose: () => undefined }).toExtend<PgStoreOptions>();
    expectTypeOf<{ schema: number }>().not.toExtend<PgStoreOptions>();
    expect(() => openSqliteStore(':memory:', { answerCacheSize: -1 })).toThrow();
  });

  it('results are discriminated unions that narrow on their tag', () => {
    expectTypeOf<IdempotentResult['outcome']>().toEqualTypeOf<
      'executed' | 'replayed' | 'notStored' | 'passedThrough' | 'problem'
    >();
    const describeResult = (result: IdempotentResult): string => {
      if (result.outcome === 'problem') {
        expectTypeOf(result).toHaveProperty('problem');
        return result.problem.type;
      }
      expectTypeOf(result).not.toHaveProperty('problem');
      return result.outcome;
    };
    expectTypeOf(describeResult).parameter(0).toEqualTypeOf<IdempotentResult>();
    expectTypeOf<SweepStop>().toEqualTypeOf<
      'drained' | 'maxBatches' | 'maxSeconds' | 'signal' | 'dryRun'
    >();
    expectTypeOf<KeyStatus>().toEqualTypeOf<'pending' | 'done'>();
    expectTypeOf<LeaseState>().toEqualTypeOf<'live' | 'lapsed' | 'unrecorded' | 'unleased'>();
    expectTypeOf<LeasedIdempotencyStore<Receipt>['acquire']>().returns.toEqualTypeOf<
      MaybePromise<AcquireResult<Receipt>>
    >();
    const describeAcquired = (result: AcquireResult<Receipt>): string => {
      switch (result.status) {
        case 'acquired':
          expectTypeOf(result.leaseUntil).toEqualTypeOf<number>();
          expectTypeOf(result.takenOver).toEqualTypeOf<boolean>();
          return `token ${result.fencingToken}`;
        case 'inProgress':
          expectTypeOf(result.leaseUntil).toEqualTypeOf<number | null>();
          return result.unrecorded ? 'unrecorded' : 'in progress';
        case 'done':
        case 'mismatch':
          expectTypeOf(result.record).toEqualTypeOf<IdempotencyRecord<Receipt>>();
          return result.record.status;
      }
    };
    expect(
      describeAcquired({ status: 'acquired', fencingToken: 2, leaseUntil: 30, takenOver: true }),
    ).toBe('token 2');
    expect(
      describeResult({
        outcome: 'executed',
        response: { status: 200, headers: {}, body: undefined },
      }),
    ).toBe('executed');
  });

  it('the root is the core only; the HTTP layer and the wrapper keep their own subpaths', () => {
    expectTypeOf<typeof root>().toHaveProperty('sweep');
    expectTypeOf<typeof root>().toHaveProperty('InvalidLimitError');
    expectTypeOf<typeof root>().not.toHaveProperty('idempotent');
    expectTypeOf<typeof root>().not.toHaveProperty('makeIdempotent');
    expectTypeOf<typeof root>().not.toHaveProperty('countByStatus');
    expectTypeOf<typeof http>().toHaveProperty('idempotent');
    expectTypeOf<typeof http>().not.toHaveProperty('toWire');
    expectTypeOf<typeof fn>().toHaveProperty('makeIdempotent');
    expect(Object.keys(root)).not.toContain('idempotent');
    expect(Object.keys(http)).toContain('idempotent');
  });

  it('pgKeysTable takes the name first, as the other dialects do', () => {
    const table = pgKeysTable('idempotency_keys', { schema: 'billing' });
    expectTypeOf<Parameters<typeof pgKeysTable>[0]>().toExtend<
      string | { name?: string; schema?: string } | undefined
    >();
    expectTypeOf<Parameters<typeof pgKeysTable>[1]>().toEqualTypeOf<
      { readonly schema?: string } | undefined
    >();
    expect(getTableName(table)).toBe('idempotency_keys');
  });

  it("an HTTP handler's step function is typed by its step log's transaction", () => {
    type Tx = Parameters<Parameters<SqliteSteps['transact']>[1]>[0];
    expectTypeOf(http.idempotencyStep<Tx>).returns.toEqualTypeOf<fn.Step<Tx>>();
    expectTypeOf<http.IdempotentOptions['steps']>().toEqualTypeOf<
      http.StepLog<unknown> | undefined
    >();
    expectTypeOf<express.ExpressIdempotencyOptions>().toHaveProperty('steps');
    expectTypeOf<express.ExpressTransactionOptions<undefined>>().not.toHaveProperty('steps');
    expect(Object.keys(http)).toContain('idempotencyStep');
  });
});
