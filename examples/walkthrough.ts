// A walk through the life of one idempotency key on an embedded SQLite file:
// reserve → finish → replay → expiry → purge → the key becoming a new request.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { openSqliteStore } from '../src/sqlite/index.js';

const dir = mkdtempSync(join(tmpdir(), 'idem-walkthrough-'));
const path = join(dir, 'idempotency.db');
const store = openSqliteStore<{ receipt: number }>(path);
const retention = 24 * 3600;
const t0 = 1_700_000_000;

function step(time: number, what: string, result: unknown): void {
  const { pending, done } = store.counts();
  const at = `t0+${String(time - t0).padStart(6)}s`;
  console.log(
    `${at}  ${what.padEnd(58)} → ${JSON.stringify(result).padEnd(16)} pending=${pending} done=${done}`,
  );
}

try {
  console.log(`SQLite store at ${path}, retention ${retention} s\n`);
  step(
    t0,
    "reserve('order-42', 'sha256:aa…', t0 + 24h)",
    store.reserve('order-42', 'sha256:aa…', t0 + retention),
  );
  step(
    t0 + 1,
    'a retry arrives while it runs: reserve again',
    store.reserve('order-42', 'sha256:aa…', t0 + 1 + retention),
  );
  step(t0 + 1, 'the retry asks for the answer: fetch', store.fetch('order-42', t0 + 1));
  step(
    t0 + 2,
    "finish with another body's fingerprint (refused)",
    store.finish('order-42', 'sha256:bb…', { receipt: 666 }),
  );
  step(
    t0 + 2,
    "finish('order-42', 'sha256:aa…', { receipt: 1 })",
    store.finish('order-42', 'sha256:aa…', { receipt: 1 }),
  );
  step(t0 + 60, 'a retry a minute later is replayed: fetch', store.fetch('order-42', t0 + 60));
  step(
    t0 + 3600,
    'a slow request reserves order-43 until t0+1h (still running)',
    store.reserve('order-43', 'sha256:cc…', t0 + 3600),
  );
  step(
    t0 + retention,
    'at expires the answer is no longer replayed: fetch',
    store.fetch('order-42', t0 + retention),
  );
  step(t0 + retention, 'retention lists it: expired(now)', store.expired(t0 + retention));
  step(
    t0 + retention,
    'purge(now) deletes it, never the overdue pending order-43',
    store.purge(t0 + retention),
  );
  step(
    t0 + retention + 5,
    'a very late retry is now a new request: reserve',
    store.reserve('order-42', 'sha256:aa…', t0 + 2 * retention),
  );
  console.log(
    '\nThe last line is the limit of any retention policy: keep answers longer than clients retry.',
  );
} finally {
  store.close();
  rmSync(dir, { recursive: true, force: true });
}
