import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { readMigrationFiles } from 'drizzle-orm/migrator';
import { Miniflare } from 'miniflare';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { packedTarball, repoRoot, scratchApp } from '../package/scratch-app.js';
import { tempDir } from '../support/temp.js';
import { bundleWorker } from '../support/worker-bundle.js';
import { STEPS_SCENARIO_EXPECTED } from '../workerd/steps-scenario.js';

const WORKER = fileURLToPath(new URL('../workerd/worker.ts', import.meta.url));

let mf: Miniflare;

beforeAll(async () => {
  const work = tempDir('idem-workerd-');
  const app = await scratchApp(join(work, 'app'), await packedTarball());
  mf = new Miniflare({
    modules: true,
    script: await bundleWorker(WORKER, app),
    compatibilityDate: '2026-04-01',
    compatibilityFlags: ['nodejs_compat'],
    d1Databases: ['DB'],
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

describe('in workerd (Miniflare), bundled as wrangler bundles a Worker', () => {
  it('loads every runtime-neutral entry, no stub', async () => {
    const entries = (await json('/entries')) as Record<string, number>;
    expect(Object.keys(entries).sort()).toEqual(
      [
        '.',
        './d1',
        './fetch',
        './function',
        './hono',
        './http',
        './libsql',
        './mysql',
        './observe',
        './pg',
      ].sort(),
    );
    for (const count of Object.values(entries)) expect(count).toBeGreaterThan(0);
  });

  it('applies the migrations once, however often and concurrently applyD1Migrations runs', async () => {
    const { journal, columns } = (await json('/migrate')) as {
      journal: { created_at: number }[];
      columns: string[];
    };
    const committed = readMigrationFiles({ migrationsFolder: join(repoRoot, 'drizzle', 'sqlite') });
    expect(journal.map((row) => row.created_at)).toEqual(
      committed.map((migration) => migration.folderMillis),
    );
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
  });

  it('gives exactly one of 10 concurrent acquires the key', async () => {
    const outcomes = (await json('/race?key=race-1')) as string[];
    expect(outcomes.filter((outcome) => outcome === 'acquired')).toHaveLength(1);
    expect(outcomes.filter((outcome) => outcome === 'inProgress')).toHaveLength(9);
  });

  it('renews, hands a key to the operator and releases it, and refuses a foreign table', async () => {
    expect(await json('/leases')).toEqual({
      acquired: 'acquired',
      renew: true,
      renewWrongAttempt: false,
      beforeLapse: 'inProgress',
      markUnrecorded: true,
      stale: ['l'],
      stats: { pending: 1, done: 0, expired: 0, stalePending: 0, lapsed: 0, unrecorded: 1 },
      releasePending: 'released',
      releaseAgain: 'missing',
      foreign: 'SchemaMismatchError',
    });
  });

  it('commits the handler batch and the answer together, and neither behind a lost fence', async () => {
    expect(await json('/transaction?key=tx-1')).toEqual({
      once: { credited: 7 },
      replay: { credited: 7 },
      taker: 'acquired',
      lost: { committed: false },
      ledger: [
        { id: 'tx-1', amount: 7 },
        { id: 'tx-1-lost-answer', amount: 3 },
      ],
      staleRow: 'pending',
      // A batch that committed but lost its answer: the call's result, from what the row holds.
      answerLost: { credited: 3 },
      answerLostReplay: { credited: 3 },
      lostAnswerRuns: 1,
    });
  });

  it('records steps, seals them with encryption on, and fences a taken-over owner on D1', async () => {
    expect(await json('/steps')).toEqual(STEPS_SCENARIO_EXPECTED);
  });

  describe.each(['/hono/pay', '/fetch/pay'])('the middleware at %s', (path) => {
    const pay = (key: string, body: unknown) =>
      call(path, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'idempotency-key': `"${key}"` },
        body: JSON.stringify(body),
      });

    it('replays the first answer byte for byte, marked, and answers 422 to another body', async () => {
      const key = `pay-${path}`;
      const first = await pay(key, { amount: 5 });
      const firstBody = new Uint8Array(await first.arrayBuffer());
      expect(first.status).toBe(201);
      expect(first.headers.get('idempotent-replayed')).toBeNull();
      const again = await pay(key, { amount: 5 });
      expect(again.status).toBe(201);
      expect(again.headers.get('idempotent-replayed')).toBe('true');
      expect(new Uint8Array(await again.arrayBuffer())).toEqual(firstBody);
      const other = await pay(key, { amount: 6 });
      expect(other.status).toBe(422);
      expect(other.headers.get('content-type')).toContain('application/problem+json');
      await other.arrayBuffer();
    });
  });
});
