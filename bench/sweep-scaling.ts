// How a full sweep's time grows with the backlog: run with `npx tsx bench/sweep-scaling.ts`.
// Linear means constant milliseconds per batch from the first quarter of the sweep to the last.
// Two layouts: rows that expire in insertion order (each batch deletes neighbouring rows) and
// rows whose expiry is scattered over the table (each batch rewrites pages all over the file).
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { shippedCore, shippedSqlite } from './support/shipped.js';

const { sweep } = shippedCore;
const { openSqliteStore } = shippedSqlite;

const BATCH = 1000;
const NOW = 10_000;
const dir = mkdtempSync(join(tmpdir(), 'idem-bench-'));

function seed(path: string, rows: number, scattered: boolean): void {
  openSqliteStore(path).close();
  const client = new Database(path);
  const insert = client.prepare("INSERT INTO keys VALUES (?, 'd', 'done', '{}', ?)");
  client.transaction(() => {
    for (let i = 0; i < rows; i++) {
      const expires = scattered ? (i * 7919) % NOW : (i / rows) * NOW;
      insert.run(`k-${String(i).padStart(8, '0')}`, expires);
    }
  })();
  client.close();
}

const mean = (values: number[]) => values.reduce((sum, v) => sum + v, 0) / values.length;

try {
  for (const scattered of [false, true]) {
    for (const rows of [50_000, 200_000, 400_000]) {
      const path = join(dir, `${scattered}-${rows}.db`);
      seed(path, rows, scattered);
      const store = openSqliteStore(path);
      const times: number[] = [];
      let last = performance.now();
      const result = await sweep(store, {
        now: NOW,
        batchSize: BATCH,
        onBatch: () => {
          const at = performance.now();
          times.push(at - last);
          last = at;
        },
      });
      store.close();
      const q = Math.floor(times.length / 4);
      const quarters = [0, 1, 2, 3].map((k) =>
        mean(times.slice(k * q, k === 3 ? undefined : (k + 1) * q)).toFixed(1),
      );
      console.log(
        `${scattered ? 'scattered' : 'ordered  '} ${String(rows).padStart(7)} rows: ` +
          `${result.seconds.toFixed(2)} s, ${Math.round(rows / result.seconds)} rows/s, ` +
          `ms per batch of ${BATCH} by quarter: ${quarters.join(' / ')}`,
      );
    }
  }
} finally {
  rmSync(dir, { recursive: true, force: true });
}
