// A Worker that runs the store and lease contracts inside workerd, over D1 and over a Durable
// Object's SQLite storage, for test/runtimes/workerd-contract.test.ts. The contracts are bundled in
// with 'vitest' standing for ./test-registry.ts: each suite is recorded at load, and a request runs
// one suite where its store lives (D1 in the Worker, the object's storage in the object).

import { drizzle as drizzleD1 } from 'drizzle-orm/d1';
import { drizzle as drizzleDurable } from 'drizzle-orm/durable-sqlite';
import { applyD1Migrations, D1IdempotencyStore } from '../../src/d1/index.js';
import {
  applyDurableSqliteMigrations,
  DurableSqliteIdempotencyStore,
  type DurableSqliteStorageLike,
} from '../../src/durable-sqlite/index.js';
import { sqliteKeysTable } from '../../src/sqlite-dialect/schema.js';
import type { HarnessFactory, RawRow } from '../contract/harness.js';
import { describeLeaseContract } from '../contract/lease-contract.js';
import { describeStoreContract } from '../contract/store-contract.js';
import type { WorkerdBinding } from '../contract/stores.js';
import { type StoreVariant, VARIANTS, variantHarness, variantName } from '../contract/variants.js';
import { runSuite } from './test-registry.js';

// biome-ignore lint/suspicious/noExplicitAny: the binding's type comes from workers-types, not installed here
type D1Binding = any;

interface Env {
  readonly DB: D1Binding;
  readonly CONTRACT: {
    idFromName(name: string): unknown;
    get(id: unknown): { fetch(request: Request): Promise<Response> };
  };
}

const COLUMNS = 'id, fingerprint, status, response, expires';
const insert = (table: string) => `INSERT INTO "${table}" (${COLUMNS}) VALUES (?, ?, ?, ?, ?)`;
const valuesOf = (row: RawRow) => [row.id, row.fingerprint, row.status, row.response, row.expires];
const tableOption = ({ table }: StoreVariant) =>
  table === 'keys' ? {} : { table: sqliteKeysTable(table) };
const encryptionOption = ({ encryption }: StoreVariant) =>
  encryption === undefined ? {} : { encryption };

// The bindings of the request being served: the suites are recorded at load, before any exists.
let d1: D1Binding;
let storage: DurableSqliteStorageLike | undefined;

function d1Harness(variant: StoreVariant): HarnessFactory {
  const table = variant.table;
  return async () => {
    const db = drizzleD1(d1);
    await applyD1Migrations(db, tableOption(variant));
    await d1.prepare(`DELETE FROM "${table}"`).run();
    const store = new D1IdempotencyStore(db, {
      ...tableOption(variant),
      ...encryptionOption(variant),
    });
    return {
      store,
      rows: async () =>
        (await d1.prepare(`SELECT ${COLUMNS} FROM "${table}" ORDER BY id`).all()).results,
      seed: async (rows) => {
        if (rows.length === 0) return;
        await d1.batch(rows.map((row) => d1.prepare(insert(table)).bind(...valuesOf(row))));
      },
      close: async () => store.close(),
    };
  };
}

function durableHarness(variant: StoreVariant): HarnessFactory {
  const table = variant.table;
  return async () => {
    const sql = storage?.sql;
    if (storage === undefined || sql === undefined) throw new Error('not inside the object');
    const db = drizzleDurable(storage as never);
    await applyDurableSqliteMigrations(db, tableOption(variant));
    sql.exec(`DELETE FROM "${table}"`);
    const store = new DurableSqliteIdempotencyStore(db, {
      ...tableOption(variant),
      ...encryptionOption(variant),
    });
    return {
      store,
      rows: async () =>
        sql.exec(`SELECT ${COLUMNS} FROM "${table}" ORDER BY id`).toArray() as unknown as RawRow[],
      seed: async (rows) => {
        for (const row of rows) sql.exec(insert(table), ...valuesOf(row));
      },
      close: async () => store.close(),
    };
  };
}

const HARNESSES: Record<WorkerdBinding, (variant: StoreVariant) => HarnessFactory> = {
  d1: d1Harness,
  'durable-object': durableHarness,
};

for (const [binding, harness] of Object.entries(HARNESSES)) {
  for (const { label, variant } of VARIANTS) {
    const name = variantName(binding, label);
    describeStoreContract(name, variantHarness(harness(variant), variant));
    describeLeaseContract(name, variantHarness(harness(variant), variant));
  }
}

async function run(url: URL): Promise<Response> {
  return Response.json(await runSuite(url.searchParams.get('suite') ?? ''));
}

/** The Durable Object whose SQLite storage the Durable Object suites run on. */
export class ContractObject {
  readonly #storage: DurableSqliteStorageLike;

  constructor(state: { readonly storage: DurableSqliteStorageLike }) {
    this.#storage = state.storage;
  }

  async fetch(request: Request): Promise<Response> {
    storage = this.#storage;
    return run(new URL(request.url));
  }
}

// biome-ignore lint/style/noDefaultExport: workerd runs a module Worker's default export
export default {
  async fetch(request: Request, env: Env): Promise<Response> {
    const url = new URL(request.url);
    if (url.pathname === '/durable-object') {
      return env.CONTRACT.get(env.CONTRACT.idFromName('contract')).fetch(request);
    }
    d1 = env.DB;
    return run(url);
  },
};
