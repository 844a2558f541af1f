import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { readMigrationFiles } from 'drizzle-orm/migrator';
import { Miniflare } from 'miniflare';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { packedTarball, repoRoot, scratchApp } from '../package/scratch-app.js';
import { tempDir } from '../support/temp.js';
import { bundleWorker } from '../support/worker-bundle.js';
import { STEPS_SCENARIO_EXPECTED } from '../workerd/steps-scenario.js';

const WORKER = fileURLToPath(new URL('../workerd/durable-worker.ts', import.meta.url));

let mf: Miniflare;

beforeAll(async () => {
  const work = tempDir('idem-durable-');
  const app = await scratchApp(join(work, 'app'), await packedTarball());
  mf = new Miniflare({
    modules: true,
    script: await bundleWorker(WORKER, app),
    compatibilityDate: '2026-04-01',
    compatibilityFlags: ['nodejs_compat'],
    durableObjects: { ACCOUNTS: { className: 'Account', useSQLite: true } },
  });
  await mf.ready;
}, 600_000);

afterAll(async () => {
  await mf?.dispose();
});

type DispatchInit = Parameters<Miniflare['dispatchFetch']>[1];

async function call(path: string, init?: DispatchInit) {
  return mf.dispatchFetch(`http://worker${path}`, init);
}

async function json(path: string): Promise<unknown> {
  const response = await call(path);
  const text = await response.text();
  if (response.status !== 200) throw new Error(`${path} answered ${response.status}: ${text}`);
  return JSON.parse(text);
}

const committedMigrations = () =>
  readMigrationFiles({ migrationsFolder: join(repoRoot, 'drizzle', 'sqlite') }).map(
    (migration) => migration.folderMillis,
  );

describe('in a SQLite Durable Object in workerd (Miniflare), bundled as wrangler bundles a Worker', () => {
  it('loads drizzle-idempotency/durable-sqlite in the object, no stub', async () => {
    expect(await json('/objects/entry/entry')).toEqual([
      'DurableSqliteIdempotencyStore',
      'applyDurableSqliteMigrations',
      'durableSqliteSteps',
      'durableSqliteTransaction',
      'keys',
      'sqliteKeysTable',
    ]);
  });

  it('records steps, seals them with encryption on, and fences a taken-over owner in the object', async () => {
    expect(await json('/objects/steps/steps')).toEqual(STEPS_SCENARIO_EXPECTED);
  });

  it('applies the migrations once, however often and concurrently they run, and refuses a foreign table', async () => {
    const { journal, defaultJournal, columns, foreign } = (await json(
      '/objects/migrate/migrate',
    )) as {
      journal: { created_at: number }[];
      defaultJournal: { created_at: number }[];
      columns: string[];
      foreign: string;
    };
    expect(journal.map((row) => row.created_at)).toEqual(committedMigrations());
    // The object's constructor applied them to the default table at its start.
    expect(defaultJournal.map((row) => row.created_at)).toEqual(committedMigrations());
    expect(columns.sort()).toEqual([
      'attempt',
      'expires',
      'fingerprint',
      'id',
      'lease_until',
      'response',
      'status',
      'steps',
      'unrecorded',
    ]);
    expect(foreign).toBe('SchemaMismatchError');
  });

  it('gives exactly one of 10 concurrent acquires sent to the same object the key', async () => {
    const outcomes = (await json('/race/race-object?key=race-1')) as string[];
    expect(outcomes).toHaveLength(10);
    expect(outcomes.filter((outcome) => outcome === 'acquired')).toHaveLength(1);
    expect(outcomes.filter((outcome) => outcome === 'inProgress')).toHaveLength(9);
  });

  it('commits the handler writes and the answer together, and nothing behind a lost fence or a throw', async () => {
    const seen = (await json('/objects/transaction/transaction?key=tx-1')) as Record<
      string,
      unknown
    >;
    expect(seen).toEqual({
      once: { credited: 7 },
      replay: { credited: 7 },
      taker: 'takenOver',
      lost: { committed: false },
      thrown: 'Error: the handler failed',
      asynchronous: 'InvalidOptionError',
      ledger: [{ id: 'tx-1', amount: 7 }],
      staleRow: 'pending',
      failingRow: expect.objectContaining({ key: 'tx-1-throws', status: 'pending' }),
    });
  });

  describe('the Fetch middleware inside the object, behind a Hono route', () => {
    const pay = (body: unknown, key = 'pay-1') =>
      call('/accounts/acme/pay', {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'idempotency-key': `"${key}"` },
        body: JSON.stringify(body),
      });

    it('replays the first answer byte for byte, marked, commits one ledger row, and answers 422 to another body', async () => {
      const first = await pay({ amount: 5 });
      const firstBody = new Uint8Array(await first.arrayBuffer());
      expect(first.status).toBe(201);
      expect(first.headers.get('idempotent-replayed')).toBeNull();
      const again = await pay({ amount: 5 });
      expect(again.status).toBe(201);
      expect(again.headers.get('idempotent-replayed')).toBe('true');
      expect(new Uint8Array(await again.arrayBuffer())).toEqual(firstBody);
      const other = await pay({ amount: 6 });
      expect(other.status).toBe(422);
      expect(other.headers.get('content-type')).toContain('application/problem+json');
      await other.arrayBuffer();
      expect(await json('/accounts/acme/ledger')).toEqual([{ amount: 5 }]);
    });
  });
});
